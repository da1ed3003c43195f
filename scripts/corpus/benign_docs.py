"""The benign corpus's documents, mails and archives: PDFs written with ReportLab, Word and Excel
files written with python-docx, openpyxl and xlwt, Word 97 documents from corpus-ole, mails with
ordinary attachments, and archives of documents and of the ordinary programs (software ships in
zips). Everything is seeded, so a rebuild writes the same content."""

import random
from datetime import datetime
from pathlib import Path

import containers

SENTENCES = [
    "The quarterly figures show a steady increase in orders from the northern region.",
    "Please review the attached schedule before the planning meeting on Thursday.",
    "Our support team can be reached at https://www.debian.org/support for general questions.",
    "The new release improves start-up time and fixes several rendering problems.",
    "Minutes of the meeting: budget approved, hiring plan postponed to the next quarter.",
    "Installation requires 200 MB of free disk space and a recent version of Windows.",
    "The documentation is available at https://docs.python.org/3/ and in the help menu.",
    "All measurements were taken at room temperature with calibrated instruments.",
    "Version 2.4.1 of the library adds support for reading compressed archives.",
    "Travel expenses must be submitted within thirty days with the original receipts.",
    "The committee thanks every volunteer who helped organise the spring conference.",
    "Backups run every night at 02:00 and are kept for ninety days.",
    "Contact the office manager if the printer on the second floor is out of toner.",
    "This report summarises the results of the customer satisfaction survey.",
    "The recipe needs two cups of flour, one egg and a pinch of salt.",
]


# The date the documents claim (python-docx and openpyxl stamp "now" otherwise).
FIXED = datetime(2026, 3, 2, 9, 30)


def paragraphs(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(SENTENCES) for _ in range(rng.randint(2, 5))) for _ in range(n)]


def pdfs(c, rng: random.Random, count: int) -> list[Path]:
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4, letter
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle
    from reportlab.graphics.shapes import Drawing, Rect, Circle
    from reportlab.graphics.charts.barcharts import VerticalBarChart

    out = c.dir("benign", "docs")
    styles = getSampleStyleSheet()
    made = []
    for i in range(count):
        p = out / f"report-{i:02d}.pdf"
        doc = SimpleDocTemplate(str(p), pagesize=A4 if i % 2 else letter, invariant=1,
                                title=f"Report {i}", author="Corpus Office")
        story = [Paragraph(f"Report {i}: {rng.choice(SENTENCES)}", styles["Title"])]
        for para in paragraphs(rng, rng.randint(3, 12)):
            story += [Paragraph(para, styles["BodyText"]), Spacer(1, 8)]
        if i % 3 == 0:
            rows = [["Item", "Qty", "Price"]] + [[f"Part {j}", str(rng.randint(1, 99)), f"{rng.uniform(1, 500):.2f}"]
                                                  for j in range(rng.randint(3, 20))]
            t = Table(rows)
            t.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.grey)]))
            story.append(t)
        if i % 4 == 1:
            d = Drawing(300, 160)
            chart = VerticalBarChart()
            chart.data = [[rng.randint(1, 40) for _ in range(6)]]
            chart.x, chart.y, chart.width, chart.height = 30, 20, 250, 120
            d.add(chart)
            d.add(Rect(0, 0, 300, 160, fillColor=None, strokeColor=colors.black))
            d.add(Circle(280, 140, 8, fillColor=colors.red))
            story.append(d)
        if i % 5 == 2:
            story.append(Paragraph('More at <link href="https://www.debian.org/doc/">the Debian documentation</link>.',
                                   styles["BodyText"]))
        doc.build(story)
        c.add(p, "benign", "benign", "documents", "pdf")
        made.append(p)
    # PDFs with an ordinary attachment (a spreadsheet export, a text file): a carrier, not a program.
    for i in range(5):
        p = out / f"with-attachment-{i}.pdf"
        name, data, mime = (f"data-{i}.csv", "\n".join(f"{j},{rng.randint(0, 999)}" for j in range(200)).encode(), "text/csv") \
            if i % 2 == 0 else (f"notes-{i}.txt", "\n".join(paragraphs(rng, 6)).encode(), "text/plain")
        containers.write_pdf_with_attachment(p, f"Export {i}", name, data, mime)
        c.add(p, "benign", "benign", "documents", "pdf", container="pdf", carries="other")
    return made


def office(c, rng: random.Random, ole: str) -> list[Path]:
    import docx
    import openpyxl
    import xlwt

    out = c.dir("benign", "docs")
    made = []
    for i in range(15):
        d = docx.Document()
        d.core_properties.author = "Corpus Office"
        d.core_properties.title = f"Memo {i}"
        d.core_properties.created = d.core_properties.modified = FIXED
        d.add_heading(f"Memo {i}", 0)
        for para in paragraphs(rng, rng.randint(2, 10)):
            d.add_paragraph(para)
        if i % 3 == 0:
            t = d.add_table(rows=4, cols=3)
            for r in t.rows:
                for cell in r.cells:
                    cell.text = str(rng.randint(0, 1000))
        p = out / f"memo-{i:02d}.docx"
        d.save(p)
        containers.normalize_zip(p)
        c.add(p, "benign", "benign", "documents", "docx")
        made.append(p)
    for i in range(10):
        wb = openpyxl.Workbook()
        ws = wb.active
        ws.title = "Budget"
        wb.properties.created = wb.properties.modified = FIXED
        ws.append(["Month", "Income", "Costs", "Balance"])
        for m in range(1, 13):
            a, b = rng.randint(1000, 9000), rng.randint(500, 8000)
            ws.append([m, a, b, f"=B{m + 1}-C{m + 1}"])
        p = out / f"budget-{i:02d}.xlsx"
        wb.save(p)
        containers.normalize_zip(p)
        c.add(p, "benign", "benign", "documents", "xlsx")
        made.append(p)
    for i in range(8):
        wb = xlwt.Workbook()
        ws = wb.add_sheet("Stock")
        for r in range(rng.randint(10, 60)):
            ws.write(r, 0, f"Item {r}")
            ws.write(r, 1, rng.randint(0, 500))
        p = out / f"stock-{i:02d}.xls"
        wb.save(str(p))
        c.add(p, "benign", "benign", "documents", "xls")
        made.append(p)
    for i in range(6):
        p = out / f"letter-{i:02d}.doc"
        containers.write_word_package(p, ole, "\r".join(paragraphs(rng, 4)), None, None)
        c.add(p, "benign", "benign", "documents", "doc")
        made.append(p)
    return made


def mails(c, rng: random.Random, docs: list[Path]) -> None:
    out = c.dir("benign", "mail")
    mimes = {".pdf": "application/pdf", ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
             ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
             ".xls": "application/vnd.ms-excel", ".doc": "application/msword"}
    for i in range(16):
        atts = []
        if i % 4 != 3:
            d = docs[(i * 7) % len(docs)]
            atts.append((d.name, d.read_bytes(), mimes[d.suffix]))
        if i % 5 == 0:
            atts.append(("notes.txt", "\n".join(paragraphs(rng, 3)).encode(), "text/plain"))
        p = out / f"message-{i:02d}.eml"
        containers.write_mail(p, f"Re: {rng.choice(SENTENCES)[:40]}", "\n\n".join(paragraphs(rng, 3)), atts,
                              sender="Office Manager <office@corpus-office.org>", to="team@corpus-office.org")
        c.add(p, "benign", "benign", "mail", "mail", container="mail" if atts else "none",
              carries="other" if atts else None)


def archives(c, rng: random.Random, docs: list[Path], programs: list[Path], seven_zip: str) -> None:
    out = c.dir("benign", "archives")
    for i in range(8):
        members = [(d.name, d.read_bytes()) for d in rng.sample(docs, 3)]
        p = out / f"documents-{i}.zip"
        containers.write_zip(p, members)
        c.add(p, "benign", "benign", "archives", "zip", container="zip", carries="other")
    for i in range(6):
        members = [(f"project-{i}/README.md", "\n\n".join(paragraphs(rng, 4)).encode()),
                   (f"project-{i}/src/main.c", b"#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n"),
                   (f"project-{i}/LICENSE", b"Permission is hereby granted, free of charge, to any person ...\n")]
        p = out / f"project-{i}.tar.gz"
        containers.write_tar_gz(p, members)
        c.add(p, "benign", "benign", "archives", "tar.gz", container="tar.gz", carries="other")
    for i in range(4):
        members = [(d.name, d.read_bytes()) for d in rng.sample(docs, 2)]
        p = out / f"documents-{i}.7z"
        containers.write_7z(p, members, seven_zip, c.scratch)
        c.add(p, "benign", "benign", "archives", "7z", container="7z", carries="other")
    # Software ships in zips: an ordinary program with its readme.
    for i, prog in enumerate(programs[::2][:8]):
        members = [(prog.name, prog.read_bytes()),
                   ("README.txt", f"{prog.stem}: unzip anywhere and run it from a command prompt.\n".encode())]
        p = out / f"{prog.stem}.zip"
        containers.write_zip(p, members)
        c.add(p, "benign", "benign", "archives", "zip", container="zip", carries="windows-program")


def build(c, programs: list[Path], seven_zip: str, ole: str, seed: int) -> None:
    rng = random.Random(seed)
    docs = pdfs(c, rng, 30)
    docs += office(c, rng, ole)
    mails(c, rng, docs)
    archives(c, rng, docs, programs, seven_zip)
