"""PDF, Word and zip files built byte by byte for the reader tests: text pages, and hostile ones
(deeply nested objects, a huge object, 2,000 pages, encrypted, a scan without text, a zip bomb)."""

from __future__ import annotations

import io
import zipfile


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _wrap(text: str, width: int = 90) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines


def build_pdf(objects: list[bytes], *, root: int = 1, trailer_extra: bytes = b"") -> bytes:
    """A PDF whose object n (1-based) is ``objects[n - 1]``, with a correct cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % n + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root %d 0 R %s>>\nstartxref\n%d\n%%%%EOF\n"
              % (len(objects) + 1, root, trailer_extra, xref))
    return out.getvalue()


def text_pdf(pages: list[str], *, outline: list[tuple[str, int]] | None = None) -> bytes:
    """A PDF with one page per text (Helvetica, wrapped), and optionally an outline of
    (title, 1-based page) bookmarks."""
    n = len(pages)
    font = 3
    first_page = 4
    objects: list[bytes] = [b"", b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = " ".join(f"{first_page + 2 * i} 0 R" for i in range(n)).encode()
    for i, text in enumerate(pages):
        ops = [b"BT /F1 11 Tf 14 TL 50 780 Td"]
        ops += [b"(%s) Tj T*" % _escape(line).encode("latin-1", "replace") for line in _wrap(text)]
        ops.append(b"ET")
        stream = b"\n".join(ops)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> >> "
                       b"/Contents %d 0 R >>" % (font, first_page + 2 * i + 1))
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    catalog = b"<< /Type /Catalog /Pages 2 0 R >>"
    if outline:
        top = len(objects) + 1
        items = list(range(top + 1, top + 1 + len(outline)))
        objects.append(b"<< /Type /Outlines /First %d 0 R /Last %d 0 R /Count %d >>" % (items[0], items[-1], len(items)))
        for k, (title, page) in enumerate(outline):
            links = (b" /Prev %d 0 R" % items[k - 1] if k else b"") + (
                b" /Next %d 0 R" % items[k + 1] if k + 1 < len(items) else b"")
            objects.append(b"<< /Title (%s) /Parent %d 0 R /Dest [%d 0 R /Fit]%s >>"
                           % (_escape(title).encode(), top, first_page + 2 * (page - 1), links))
        catalog = b"<< /Type /Catalog /Pages 2 0 R /Outlines %d 0 R >>" % top
    objects[0] = catalog
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n)
    return build_pdf(objects)


def nested_pdf(depth: int = 200_000) -> bytes:
    """A one-page PDF whose page dictionary holds an array nested ``depth`` deep."""
    deep = b"[" * depth + b"]" * depth
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Junk " + deep + b" >>",
               b"<< /Length 0 >>\nstream\n\nendstream"]
    return build_pdf(objects)


def huge_object_pdf(size: int = 40 << 20) -> bytes:
    """A one-page PDF whose content stream inflates to ``size`` bytes of text-showing operators
    (the file is small; reading it means parsing all of them)."""
    import zlib

    op = b"BT /F1 9 Tf 10 10 Td (huge object text) Tj ET\n"
    body = (op * (size // len(op) + 1))[:size]
    packed = zlib.compress(body, 9)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> "
               b"/Contents 4 0 R >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    return build_pdf(objects)


def scanned_pdf(pages: int = 3) -> bytes:
    """A PDF whose pages only paint an image (a scan: no text layer)."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    pixel = b"\x80" * (16 * 16)
    objects.append(b"<< /Type /XObject /Subtype /Image /Width 16 /Height 16 /ColorSpace /DeviceGray "
                   b"/BitsPerComponent 8 /Length %d >>\nstream\n" % len(pixel) + pixel + b"\nendstream")
    for _ in range(pages):
        page = len(objects) + 1
        kids.append(b"%d 0 R" % page)
        stream = b"q 500 0 0 700 50 50 cm /Im1 Do Q"
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im1 3 0 R "
                       b">> >> /Contents %d 0 R >>" % (page + 1))
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), pages)
    return build_pdf(objects)


def encrypted_pdf(pages: list[str], password: str = "s3cret") -> bytes:
    """``text_pdf(pages)`` encrypted with a user password (RC4, which pypdf writes by itself)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf(pages))))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _docx_parts(document_xml: bytes) -> dict[str, bytes]:
    return {
        "[Content_Types].xml": b'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
        b'package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
        b'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/'
        b'document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
        b"</Types>",
        "_rels/.rels": b'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/'
        b'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
        b'2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
        "word/document.xml": document_xml,
    }


def zip_bomb_docx(unpacked: int = 1 << 30) -> bytes:
    """A .docx whose document.xml inflates to ``unpacked`` bytes (a zip bomb: a few MB packed)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in _docx_parts(b"").items():
            if name != "word/document.xml":
                z.writestr(name, data)
        with z.open("word/document.xml", "w", force_zip64=True) as fh:
            head = b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/' \
                   b'2006/main"><w:body><w:p><w:r><w:t>'
            fh.write(head)
            block = b"A" * (1 << 20)
            for _ in range(unpacked >> 20):
                fh.write(block)
            fh.write(b"</w:t></w:r></w:p></w:body></w:document>")
    return out.getvalue()
