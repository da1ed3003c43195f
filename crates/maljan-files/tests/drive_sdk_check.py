"""The drives' official Python SDKs against maljan-testkit's fixture-drives.

Usage: drive_sdk_check.py BASE_URL TOKEN DRIVE...  (DRIVE: dropbox, onedrive, box, google, gcs)

gcs (Google Cloud Storage's XML API) signs with the service account whose JSON key file
MALJAN_GCS_KEY_FILE names, and reaches BASE_URL/storage.googleapis.com as its endpoint.

Each SDK talks to its real hosts (https://api.dropboxapi.com/...); a requests adapter sends
those requests to BASE_URL/<host>/<path> instead, so the SDK's own code builds every request and
parses every answer. Prints one JSON object of what the SDKs read, for the Rust test to check.
"""

import base64
import hashlib
import io
import json
import sys
import urllib.parse

import requests
from requests.adapters import HTTPAdapter


class ToFixture(HTTPAdapter):
    """Sends https://HOST/PATH?Q to BASE/HOST/PATH?Q."""

    def __init__(self, base):
        super().__init__()
        self.base = base.rstrip("/")

    def send(self, request, **kwargs):
        u = urllib.parse.urlsplit(request.url)
        request.url = f"{self.base}/{u.netloc}{u.path}" + (f"?{u.query}" if u.query else "")
        return super().send(request, **kwargs)


def session(base):
    s = requests.Session()
    s.mount("https://", ToFixture(base))
    return s


def check_dropbox(base, token):
    import dropbox
    from dropbox.files import WriteMode, UploadSessionCursor, CommitInfo
    from dropbox.exceptions import ApiError, AuthError

    out = {}
    dbx = dropbox.Dropbox(oauth2_access_token=token, session=session(base))
    small = b"hello from the official SDK\n"
    md = dbx.files_upload(small, "/sdk/Small.txt", mode=WriteMode.overwrite)
    out["upload"] = [md.path_display, md.size, md.name]
    meta, resp = dbx.files_download("/sdk/small.txt")
    out["download"] = [meta.path_display, hashlib.sha256(resp.content).hexdigest()]
    out["small_sha256"] = hashlib.sha256(small).hexdigest()
    # An upload session, three pieces.
    pieces = [b"a" * 1000, b"b" * 1000, b"c" * 500]
    start = dbx.files_upload_session_start(pieces[0])
    cursor = UploadSessionCursor(session_id=start.session_id, offset=1000)
    dbx.files_upload_session_append_v2(pieces[1], cursor)
    cursor.offset = 2000
    big = dbx.files_upload_session_finish(
        pieces[2], cursor, CommitInfo(path="/sdk/deep/Big.bin", mode=WriteMode.overwrite)
    )
    out["session"] = [big.path_display, big.size, big.content_hash]
    whole = b"".join(pieces)
    blocks = hashlib.sha256()
    blocks.update(hashlib.sha256(whole).digest())
    out["session_expected_hash"] = blocks.hexdigest()
    for i in range(4):
        dbx.files_upload(b"%d" % i, f"/sdk/many/f{i}.txt", mode=WriteMode.overwrite)
    listed = dbx.files_list_folder("/sdk", recursive=True)
    paths = [e.path_display for e in listed.entries]
    pages = 1
    while listed.has_more:
        listed = dbx.files_list_folder_continue(listed.cursor)
        paths += [e.path_display for e in listed.entries]
        pages += 1
    out["listed"] = sorted(paths)
    out["pages"] = pages
    kinds = {type(e).__name__ for e in dbx.files_list_folder("/sdk").entries}
    out["kinds"] = sorted(kinds)
    deleted = dbx.files_delete_v2("/sdk/many")
    out["deleted"] = [type(deleted.metadata).__name__, deleted.metadata.path_display]
    try:
        dbx.files_download("/sdk/missing.txt")
        out["missing"] = "no error"
    except ApiError as e:
        out["missing"] = [e.error.is_path(), e.error.get_path().is_not_found()]
    try:
        dbx.files_delete_v2("/sdk/missing.txt")
        out["missing_delete"] = "no error"
    except ApiError as e:
        out["missing_delete"] = [e.error.is_path_lookup(), e.error.get_path_lookup().is_not_found()]
    ranged = session(base).post(
        "https://content.dropboxapi.com/2/files/download",
        headers={
            "Authorization": f"Bearer {token}",
            "Dropbox-API-Arg": json.dumps({"path": "/sdk/small.txt"}),
            "Range": "bytes=6-",
        },
    )
    out["range"] = [ranged.status_code, ranged.content.decode()]
    try:
        dropbox.Dropbox(oauth2_access_token="wrong", session=session(base)).files_list_folder("")
        out["bad_token"] = "no error"
    except AuthError as e:
        out["bad_token"] = e.error.is_invalid_access_token()
    return out


def check_onedrive(base, token):
    """msal's device flow for the token, then Graph's drive-item routes over requests."""
    import msal

    out = {}
    http = session(base)
    app = msal.PublicClientApplication(
        "fixture-client",
        authority="https://login.microsoftonline.com/organizations",
        http_client=http,
        instance_discovery=False,
    )
    flow = app.initiate_device_flow(scopes=["Files.ReadWrite"])
    out["flow"] = [flow.get("user_code"), "microsoft.com/devicelogin" in flow.get("message", "")]
    result = app.acquire_token_by_device_flow(flow)
    out["token"] = result.get("access_token") == token
    graph = "https://graph.microsoft.com/v1.0/me/drive"
    auth = {"Authorization": f"Bearer {result.get('access_token')}"}
    small = b"hello from requests to Graph\n"
    r = http.put(f"{graph}/root:/sdk/Small%20note.txt:/content", data=small, headers=auth)
    out["put"] = [r.status_code, r.json()["name"], r.json()["size"]]
    s = http.post(f"{graph}/root:/sdk/deep/Big.bin:/createUploadSession",
                  json={"item": {"@microsoft.graph.conflictBehavior": "replace"}}, headers=auth).json()
    piece = 320 * 1024
    whole = b"x" * piece + b"y" * 1000
    first = http.put(s["uploadUrl"], data=whole[:piece],
                     headers={"Content-Range": f"bytes 0-{piece - 1}/{len(whole)}"})
    last = http.put(s["uploadUrl"], data=whole[piece:],
                    headers={"Content-Range": f"bytes {piece}-{len(whole) - 1}/{len(whole)}"})
    out["session"] = [first.status_code, first.json()["nextExpectedRanges"], last.status_code, last.json()["size"]]
    got = http.get(f"{graph}/root:/sdk/deep/Big.bin:/content", headers=auth)
    out["download"] = [hashlib.sha256(got.content).hexdigest() == hashlib.sha256(whole).hexdigest(),
                       [h.status_code for h in got.history]]
    for i in range(4):
        http.put(f"{graph}/root:/sdk/many/f{i}.txt:/content", data=b"%d" % i, headers=auth)
    page = http.get(f"{graph}/root:/sdk/many:/children", headers=auth).json()
    names, pages = [e["name"] for e in page["value"]], 1
    while "@odata.nextLink" in page:
        page = http.get(page["@odata.nextLink"], headers=auth).json()
        names += [e["name"] for e in page["value"]]
        pages += 1
    out["listed"] = [names, pages]
    out["delete"] = http.delete(f"{graph}/root:/sdk/many", headers=auth).status_code
    missing = http.get(f"{graph}/root:/sdk/many", headers=auth)
    out["missing"] = [missing.status_code, missing.json()["error"]["code"]]
    out["bad_token"] = http.get(f"{graph}/root/children", headers={"Authorization": "Bearer wrong"}).status_code
    declined = msal.PublicClientApplication("fixture-client", authority="https://login.microsoftonline.com/common",
                                            http_client=http, instance_discovery=False)
    http.post(f"{base}/_fixture/faults", json={"device_login": "declined"})
    flow = declined.initiate_device_flow(scopes=["Files.ReadWrite"])
    out["declined"] = declined.acquire_token_by_device_flow(flow).get("error")
    http.post(f"{base}/_fixture/faults", json={})
    return out


def check_box(base, token):
    """box_sdk_gen (boxsdk 10) with its base URLs moved to the fixture."""
    import box_sdk_gen as box

    out = {}
    urls = box.BaseUrls(base_url=f"{base}/api.box.com", upload_url=f"{base}/upload.box.com/api",
                        oauth_2_url=f"{base}/account.box.com/api/oauth2")
    client = box.BoxClient(auth=box.BoxDeveloperTokenAuth(token=token),
                           network_session=box.NetworkSession(base_urls=urls))
    folder = client.folders.create_folder("sdk", box.CreateFolderParent(id="0"))
    out["folder"] = [folder.name, folder.parent.id]
    small = b"hello from box_sdk_gen\n"
    up = client.uploads.upload_file(
        box.UploadFileAttributes(name="Small.txt", parent=box.UploadFileAttributesParentField(id=folder.id)),
        io.BytesIO(small))
    f = up.entries[0]
    out["upload"] = [f.name, f.size, f.sha_1 == hashlib.sha1(small).hexdigest()]
    stream = client.downloads.download_file(f.id)
    out["download"] = stream.read() == small
    try:
        client.uploads.preflight_file_upload_check(name="small.txt", size=3,
                                                   parent=box.PreflightFileUploadCheckParent(id=folder.id))
        out["preflight"] = "no conflict"
    except box.BoxAPIError as e:
        out["preflight"] = [e.response_info.status_code, e.response_info.code,
                            e.response_info.context_info["conflicts"]["id"] == f.id]
    big = bytes(range(256)) * (21_000_000 // 256)
    chunked = client.chunked_uploads.upload_big_file(io.BytesIO(big), "Big.bin", len(big), folder.id)
    out["chunked"] = [chunked.name, chunked.size, chunked.sha_1 == hashlib.sha1(big).hexdigest()]
    items = client.folders.get_folder_items(folder.id, limit=10)
    out["listed"] = sorted(e.name for e in items.entries)
    client.files.delete_file_by_id(f.id)
    try:
        client.files.get_file_by_id(f.id)
        out["missing"] = "no error"
    except box.BoxAPIError as e:
        out["missing"] = [e.response_info.status_code, e.response_info.code]
    try:
        client.folders.delete_folder_by_id(folder.id)
        out["not_empty"] = "no error"
    except box.BoxAPIError as e:
        out["not_empty"] = e.response_info.code
    client.folders.delete_folder_by_id(folder.id, recursive=True)
    out["deleted"] = sorted(e.name for e in client.folders.get_folder_items("0").entries)
    bad = box.BoxClient(auth=box.BoxDeveloperTokenAuth(token="wrong"),
                        network_session=box.NetworkSession(base_urls=urls))
    try:
        bad.folders.get_folder_items("0")
        out["bad_token"] = "no error"
    except box.BoxSDKError as e:
        # The SDK reads the 401 as an expired developer token.
        out["bad_token"] = "expired" in str(e)
    return out


def check_google(base, token):
    """googleapiclient's own Drive v3 (its bundled discovery document) over an httplib2 that
    sends https://www.googleapis.com/... to the fixture."""
    import httplib2
    from googleapiclient.discovery import build
    from googleapiclient.errors import HttpError
    from googleapiclient.http import MediaIoBaseDownload, MediaIoBaseUpload

    class ToFixtureHttp(httplib2.Http):
        def __init__(self, bearer):
            super().__init__()
            self.bearer = bearer
            # As googleapiclient.http.build_http: a 308 is Drive's "resume incomplete".
            self.redirect_codes = self.redirect_codes - {308}

        def request(self, uri, method="GET", body=None, headers=None, *args, **kwargs):
            u = urllib.parse.urlsplit(uri)
            if u.scheme == "https":
                uri = f"{base}/{u.netloc}{u.path}" + (f"?{u.query}" if u.query else "")
            headers = dict(headers or {})
            headers["authorization"] = f"Bearer {self.bearer}"
            return super().request(uri, method, body=body, headers=headers, *args, **kwargs)

    out = {}
    drive = build("drive", "v3", http=ToFixtureHttp(token), static_discovery=True)
    folder = drive.files().create(body={"name": "sdk", "mimeType": "application/vnd.google-apps.folder"},
                                  fields="id").execute()
    whole = bytes(range(256)) * 4096 + b"tail"
    media = MediaIoBaseUpload(io.BytesIO(whole), mimetype="application/octet-stream",
                              chunksize=256 * 1024, resumable=True)
    made = drive.files().create(body={"name": "Big.bin", "parents": [folder["id"]]}, media_body=media,
                                fields="id,name,size").execute()
    out["upload"] = [made["name"], made["size"]]
    buf = io.BytesIO()
    down = MediaIoBaseDownload(buf, drive.files().get_media(fileId=made["id"]), chunksize=300 * 1024)
    done, chunks = False, 0
    while not done:
        _, done = down.next_chunk()
        chunks += 1
    out["download"] = [hashlib.sha256(buf.getvalue()).hexdigest() == hashlib.sha256(whole).hexdigest(), chunks]
    for i in range(4):
        m = MediaIoBaseUpload(io.BytesIO(b"%d" % i), mimetype="text/plain", resumable=True)
        drive.files().create(body={"name": f"f{i}.txt", "parents": [folder["id"]]}, media_body=m).execute()
    names, token_, pages = [], None, 0
    while True:
        r = drive.files().list(q=f"'{folder['id']}' in parents and trashed = false",
                               fields="nextPageToken, files(id, name)", pageToken=token_).execute()
        names += [f["name"] for f in r["files"]]
        pages += 1
        token_ = r.get("nextPageToken")
        if not token_:
            break
    out["listed"] = [sorted(names), pages]
    found = drive.files().list(q="mimeType = 'application/vnd.google-apps.folder' and name = 'sdk'").execute()
    out["folder_query"] = [f["id"] for f in found["files"]] == [folder["id"]]
    perm = drive.permissions().create(fileId=made["id"], body={"type": "anyone", "role": "reader"},
                                      fields="id").execute()
    out["permission"] = "id" in perm
    drive.files().delete(fileId=made["id"]).execute()
    try:
        drive.files().get(fileId=made["id"]).execute()
        out["missing"] = "no error"
    except HttpError as e:
        out["missing"] = [e.resp.status, e.error_details[0]["reason"]]
    try:
        build("drive", "v3", http=ToFixtureHttp("wrong"), static_discovery=True).files().list().execute()
        out["bad_token"] = "no error"
    except HttpError as e:
        out["bad_token"] = e.resp.status
    return out


def check_gcs(base, _token):
    """google-cloud-storage over the XML API: its XML multipart upload (transfer_manager), and V4
    signed URLs it makes (PUT, GET with Range, HEAD, DELETE, a precondition) sent with requests;
    the bucket is made with its JSON call. Listing has no XML client in the SDK: the raw answer
    goes back for the Rust test to check against the documented ListBucketResult."""
    import datetime
    import os
    import tempfile
    import xml.etree.ElementTree as ET

    import google_crc32c
    from google.api_core import exceptions as gexc
    from google.auth.transport.requests import Request
    from google.cloud import storage
    from google.cloud.storage import transfer_manager
    from google.oauth2 import service_account

    endpoint = f"{base}/storage.googleapis.com"
    info = json.load(open(os.environ["MALJAN_GCS_KEY_FILE"]))
    creds = service_account.Credentials.from_service_account_info(
        info, scopes=["https://www.googleapis.com/auth/devstorage.full_control"]
    ).with_always_use_jwt_access(True)
    client = storage.Client(
        project=info["project_id"], credentials=creds, client_options={"api_endpoint": endpoint}
    )
    out = {}
    bucket = client.create_bucket("sdk-bucket")
    out["bucket"] = bucket.name
    try:
        client.create_bucket("sdk-bucket")
        out["again"] = "no error"
    except gexc.Conflict as e:
        out["again"] = e.code

    def code(r):
        return [r.status_code, ET.fromstring(r.content).findtext("Code")]

    # 3 parts of 5 MiB and a tail, uploaded concurrently by the SDK's XML multipart upload; it
    # checks each part's x-goog-hash crc32c against its own.
    data = b"".join(hashlib.sha256(b"%d" % i).digest() for i in range((16 << 20) // 32 + 100))
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        blob = bucket.blob("dir/big file+1.bin")
        transfer_manager.upload_chunks_concurrently(
            f.name, blob, chunk_size=5 << 20, worker_type=transfer_manager.THREAD, max_workers=3
        )

    def signed(b, method, headers=None):
        return b.generate_signed_url(
            version="v4", api_access_endpoint=endpoint, method=method, credentials=creds,
            expiration=datetime.timedelta(minutes=5), headers=headers,
        )

    r = requests.get(signed(blob, "GET"))
    crc = google_crc32c.Checksum(r.content)
    ours = "crc32c=" + base64.b64encode(crc.digest()).decode()
    out["download"] = [r.status_code, len(r.content) == len(data),
                       hashlib.sha256(r.content).hexdigest() == hashlib.sha256(data).hexdigest(),
                       ours in r.headers["x-goog-hash"], r.headers["etag"].endswith('-4"')]
    r = requests.get(signed(blob, "GET"), headers={"Range": "bytes=100-199"})
    out["range"] = [r.status_code, r.content == data[100:200], r.headers["content-range"]]
    r = requests.get(signed(blob, "GET"), headers={"Range": f"bytes={len(data)}-"})
    out["past_end"] = code(r)
    r = requests.head(signed(blob, "HEAD"))
    out["head"] = [r.status_code, int(r.headers["content-length"]) == len(data),
                   bool(r.headers["x-goog-generation"]), bool(r.headers["last-modified"])]

    small = bucket.blob("small.txt")
    r = requests.put(signed(small, "PUT"), data=b"from the official SDK\n")
    md5 = base64.b64encode(hashlib.md5(b"from the official SDK\n").digest()).decode()
    out["put"] = [r.status_code, f"md5={md5}" in r.headers["x-goog-hash"], bool(r.headers["etag"])]
    create_only = {"x-goog-if-generation-match": "0"}
    r = requests.put(signed(small, "PUT", create_only), data=b"again", headers=create_only)
    out["create_only"] = code(r)
    bad_hash = {"x-goog-hash": "crc32c=AAAAAA=="}
    r = requests.put(signed(small, "PUT", bad_hash), data=b"changed", headers=bad_hash)
    out["bad_digest"] = code(r)
    url = signed(small, "GET")
    out["tampered"] = code(requests.get(url[:-1] + ("0" if url[-1] != "0" else "1")))
    r = requests.delete(signed(small, "DELETE"))
    out["delete"] = r.status_code
    out["missing"] = code(requests.get(signed(small, "GET")))
    out["missing_delete"] = code(requests.delete(signed(small, "DELETE")))

    # An XML multipart upload cancelled with the SDK's own call (it wants 204).
    from google.cloud.storage._media.requests import XMLMPUContainer

    container = XMLMPUContainer(f"{endpoint}/sdk-bucket/cancelled.bin", "unused")
    container.initiate(client._http, "application/octet-stream")
    container.cancel(client._http)
    out["cancelled"] = bool(container.upload_id)

    # google-auth's self-signed JWT on the XML listing (no SDK client parses it).
    creds.refresh(Request())
    auth = {"Authorization": f"Bearer {creds.token}"}
    q = "list-type=2&prefix=d&max-keys=1000"
    out["list_xml"] = requests.get(f"{endpoint}/sdk-bucket?{q}", headers=auth).text
    r = requests.get(f"{endpoint}/no-such-bucket?list-type=2", headers=auth)
    out["no_bucket"] = code(r)
    r = requests.get(f"{endpoint}/sdk-bucket?list-type=2", headers={"Authorization": "Bearer x.y.z"})
    out["bad_token"] = code(r)
    return out


def main():
    base, token, drives = sys.argv[1], sys.argv[2], sys.argv[3:]
    checks = {
        "dropbox": check_dropbox,
        "onedrive": check_onedrive,
        "box": check_box,
        "google": check_google,
        "gcs": check_gcs,
    }
    print(json.dumps({d: checks[d](base, token) for d in drives}))


if __name__ == "__main__":
    main()
