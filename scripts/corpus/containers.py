"""Carriers for the labelled corpora: zip, 7z, tar, mail, PDF with an /EmbeddedFile, and Word
documents (through the corpus-ole generator). Standard library only, except the 7z and
corpus-ole programs, which the caller names.

Each writer takes the payload bytes and the name the payload has inside the carrier, and writes
one file; none of them runs anything it carries."""

import base64
import email.policy
import io
import subprocess
import tarfile
import zipfile
import zlib
from email.message import EmailMessage
from email.utils import format_datetime
from datetime import datetime, timezone
from pathlib import Path

# The date every generated carrier claims, so rebuilding gives the same bytes.
FIXED_DATE = datetime(2026, 3, 2, 9, 30, tzinfo=timezone.utc)
ZIP_DATE = (2026, 3, 2, 9, 30, 0)


def write_zip(out: Path, members: list[tuple[str, bytes]]) -> None:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, data)


def normalize_zip(path: Path) -> None:
    """Rewrites an OOXML file (a zip) with fixed member times: the libraries stamp "now"."""
    import re

    with zipfile.ZipFile(path) as z:
        members = [(i.filename, z.read(i)) for i in z.infolist()]
    fixed = FIXED_DATE.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    members = [
        (n, re.sub(rb"(<dcterms:(?:created|modified)[^>]*>)[^<]*", rb"\g<1>" + fixed, d) if n == "docProps/core.xml" else d)
        for n, d in members
    ]
    write_zip(path, members)


def write_tar_gz(out: Path, members: list[tuple[str, bytes]]) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(FIXED_DATE.timestamp())
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
    import gzip

    out.write_bytes(gzip.compress(buf.getvalue(), mtime=int(FIXED_DATE.timestamp())))


def write_7z(out: Path, members: list[tuple[str, bytes]], seven_zip: str, scratch: Path) -> None:
    """7z through p7zip's `7z` (Debian p7zip-full): the members are staged in a scratch folder."""
    stage = scratch / ("7z-" + out.stem)
    stage.mkdir(parents=True, exist_ok=True)
    names = []
    for name, data in members:
        p = stage / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        names.append(name)
    out.unlink(missing_ok=True)
    subprocess.run(
        [seven_zip, "a", "-bd", "-y", "-mtm=off", "-mtc=off", "-mta=off", str(out.resolve()), *names],
        cwd=stage,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def write_mail(
    out: Path,
    subject: str,
    body: str,
    attachments: list[tuple[str, bytes, str]],
    sender: str = "Accounts Team <accounts@northwind-trading.com>",
    to: str = "j.doe@contoso-mail.com",
) -> None:
    """An RFC 5322 message with each attachment base64-encoded (name, data, MIME type)."""
    msg = EmailMessage(policy=email.policy.SMTP)
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = format_datetime(FIXED_DATE)
    msg["Message-ID"] = f"<{abs(hash_stable(subject + out.name)):x}@mail.northwind-trading.com>"
    msg.set_content(body)
    for name, data, mime in attachments:
        maintype, subtype = mime.split("/", 1)
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    if msg.is_multipart():
        # A fixed boundary (the default one is random), so a rebuild writes the same bytes.
        msg.set_boundary(f"=_corpus_{hash_stable(out.name):08x}")
    out.write_bytes(msg.as_bytes())


def hash_stable(s: str) -> int:
    """A hash that does not change between runs (Python's str hash is salted)."""
    return zlib.crc32(s.encode())


def write_pdf_with_attachment(out: Path, text: str, name: str, data: bytes, mime: str) -> None:
    """A one-page PDF whose name tree lists `name` as an /EmbeddedFile (as Acrobat's "attach file"
    writes it), and which opens with the attachments pane shown."""
    objs: list[bytes] = []

    def add(body: bytes) -> int:
        objs.append(body)
        return len(objs)

    packed = zlib.compress(data, 9)
    subtype = mime.replace("/", "#2F")
    ef = add(
        b"<< /Type /EmbeddedFile /Subtype /" + subtype.encode() + b" /Filter /FlateDecode"
        + b" /Length " + str(len(packed)).encode()
        + b" /Params << /Size " + str(len(data)).encode() + b" /ModDate (D:20260302093000Z) >> >>\nstream\n"
        + packed + b"\nendstream"
    )
    fname = pdf_string(name)
    spec = add(
        b"<< /Type /Filespec /F " + fname + b" /UF " + fname + b" /EF << /F " + str(ef).encode()
        + b" 0 R >> /Desc (Attachment) >>"
    )
    content = (
        b"BT /F1 12 Tf 72 720 Td " + pdf_string(text) + b" Tj 0 -20 Td "
        + pdf_string("The file is attached to this document.") + b" Tj ET"
    )
    stream = add(b"<< /Length " + str(len(content)).encode() + b" >>\nstream\n" + content + b"\nendstream")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    # Page tree: the pages object is written after the page, which points back to it.
    pages_id = len(objs) + 2
    page = add(
        b"<< /Type /Page /Parent " + str(pages_id).encode() + b" 0 R /MediaBox [0 0 612 792]"
        + b" /Contents " + str(stream).encode() + b" 0 R /Resources << /Font << /F1 "
        + str(font).encode() + b" 0 R >> >> >>"
    )
    pages = add(b"<< /Type /Pages /Kids [" + str(page).encode() + b" 0 R] /Count 1 >>")
    assert pages == pages_id
    catalog = add(
        b"<< /Type /Catalog /Pages " + str(pages).encode() + b" 0 R /PageMode /UseAttachments"
        + b" /Names << /EmbeddedFiles << /Names [" + fname + b" " + str(spec).encode() + b" 0 R] >> >> >>"
    )
    info = add(b"<< /Producer (maljan corpus) /CreationDate (D:20260302093000Z) >>")
    outb = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objs, start=1):
        offsets.append(len(outb))
        outb += str(i).encode() + b" 0 obj\n" + body + b"\nendobj\n"
    xref = len(outb)
    outb += b"xref\n0 " + str(len(objs) + 1).encode() + b"\n0000000000 65535 f \n"
    for off in offsets:
        outb += b"%010d 00000 n \n" % off
    outb += (
        b"trailer\n<< /Size " + str(len(objs) + 1).encode() + b" /Root " + str(catalog).encode()
        + b" 0 R /Info " + str(info).encode() + b" 0 R >>\nstartxref\n" + str(xref).encode() + b"\n%%EOF\n"
    )
    out.write_bytes(bytes(outb))


def pdf_string(s: str) -> bytes:
    esc = s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + esc.encode("latin-1", "replace") + b")"


def package_native(name: str, data: bytes) -> bytes:
    """The OLE Packager's native data: flags, label, source path, then the temporary path and the
    file, as Word and WordPad write an embedded "Package"."""
    source = f"C:\\Users\\user\\Desktop\\{name}".encode()
    temp = f"C:\\Users\\user\\AppData\\Local\\Temp\\{name}".encode() + b"\0"
    return (
        (2).to_bytes(2, "little") + name.encode() + b"\0" + source + b"\0"
        + (0x00030000).to_bytes(4, "little") + len(temp).to_bytes(4, "little") + temp
        + len(data).to_bytes(4, "little") + data
    )


def write_rtf_package(out: Path, text: str, name: str, data: bytes) -> None:
    """An RTF document with an embedded OLE1 "Package" object (\\object\\objemb, \\objdata in hex)."""
    native = package_native(name, data)
    class_name = b"Package\0"
    ole1 = (
        (0x00000501).to_bytes(4, "little") + (2).to_bytes(4, "little")
        + len(class_name).to_bytes(4, "little") + class_name
        + (0).to_bytes(4, "little") + (0).to_bytes(4, "little")
        + len(native).to_bytes(4, "little") + native
    )
    hexdata = ole1.hex()
    lines = "\n".join(hexdata[i : i + 128] for i in range(0, len(hexdata), 128))
    rtf = (
        "{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0 Calibri;}}\n"
        f"\\pard\\f0\\fs22 {text}\\par\n"
        "\\pard Open the attached file to continue.\\par\n"
        "{\\object\\objemb\\objw1440\\objh1440{\\*\\objclass Package}{\\*\\objdata\n"
        f"{lines}\n}}}}\n}}\n"
    )
    out.write_text(rtf)


def write_html_smuggle(out: Path, name: str, data: bytes) -> None:
    """An HTML page that hands the visitor a file from inside itself ("HTML smuggling"): a base64
    data: link with a download name, and the same bytes rebuilt as a Blob by a script."""
    b = base64.b64encode(data).decode()
    html = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Secure document</title></head>
<body>
<p>Your document is ready. If the download does not start, <a id="dl" href="data:application/octet-stream;base64,{b}" download="{name}">click here</a>.</p>
<script>
var b64 = document.getElementById("dl").href.split(",")[1];
var bin = atob(b64), bytes = new Uint8Array(bin.length);
for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
var url = URL.createObjectURL(new Blob([bytes], {{type: "application/octet-stream"}}));
var a = document.createElement("a"); a.href = url; a.download = "{name}"; document.body.appendChild(a); a.click();
</script>
</body></html>
"""
    out.write_text(html)


def write_word_package(out: Path, ole_tool: str, text: str, payload: Path | None, label: str | None) -> None:
    """A Word 97–2003 .doc; with a payload, the payload is an embedded OLE Package object."""
    cmd = [ole_tool, str(out), "--text", text]
    if payload is not None:
        cmd += ["--package", str(payload)]
        if label:
            cmd += ["--label", label]
    subprocess.run(cmd, check=True)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
