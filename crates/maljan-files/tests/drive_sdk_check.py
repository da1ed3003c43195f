"""The drives' official Python SDKs against maljan-testkit's fixture-drives.

Usage: drive_sdk_check.py BASE_URL TOKEN DRIVE...  (DRIVE: dropbox)

Each SDK talks to its real hosts (https://api.dropboxapi.com/...); a requests adapter sends
those requests to BASE_URL/<host>/<path> instead, so the SDK's own code builds every request and
parses every answer. Prints one JSON object of what the SDKs read, for the Rust test to check.
"""

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


def main():
    base, token, drives = sys.argv[1], sys.argv[2], sys.argv[3:]
    checks = {"dropbox": check_dropbox}
    print(json.dumps({d: checks[d](base, token) for d in drives}))


if __name__ == "__main__":
    main()
