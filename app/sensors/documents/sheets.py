"""Spreadsheets as tables: Excel (.xlsx, openpyxl, MIT) and CSV/TSV (the standard library).

Each sheet is a table: its first non-empty row is the header, repeated at the top of every part;
the other rows follow as ``a | b | c`` lines. A part of an Excel sheet is cited by its cell range
(``sheet:Q3!A2:F40``), a part of a CSV file by its lines (``lines:2-40``). Formulas give their
cached values (what the file shows). At most ``MAX_CELLS`` cells are read.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from typing import Any

from app.core.session.selectors import sheet
from app.sensors.documents.chunks import MAX_WORDS, Unit
from app.sensors.documents.errors import DocumentRefused
from app.sensors.documents.office import check_zip

MAX_CELLS = 2_000_000
MAX_COLUMNS = 200


def column_letter(n: int) -> str:
    """1 → A, 27 → AA."""
    out = ""
    while n > 0:
        n, rest = divmod(n - 1, 26)
        out = chr(65 + rest) + out
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return " ".join(str(value).split())


def _row_blocks(rows: list[tuple[int, str]], header: str, max_words: int) -> list[list[tuple[int, str]]]:
    """Rows (number, text) grouped so that header + rows stay within ``max_words``."""
    budget = max(20, max_words - len(header.split()))
    blocks: list[list[tuple[int, str]]] = []
    words = 0
    for number, text in rows:
        n = len(text.split())
        if not blocks or words + n > budget:
            blocks.append([])
            words = 0
        blocks[-1].append((number, text))
        words += n
    return blocks


def _table(rows: Iterable[tuple[int, list[str]]], name: str) -> tuple[str, list[tuple[int, str]], int]:
    """(header line, [(row number, row line)], columns) of a table's non-empty rows."""
    header, body, width, cells = "", [], 0, 0
    for number, values in rows:
        values = values[:MAX_COLUMNS]
        cells += len(values)
        if cells > MAX_CELLS:
            raise DocumentRefused(f"{name} has more than {MAX_CELLS:,} cells; too large to read")
        while values and not values[-1]:
            values.pop()
        if not values:
            continue
        width = max(width, len(values))
        line = " | ".join(values)
        if not header:
            header = line
        else:
            body.append((number, line))
    return header, body, width


def read_xlsx(data: bytes, name: str, progress: Callable[..., None]) -> tuple[list[Unit], dict[str, Any]]:
    check_zip(data, name)
    import openpyxl

    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # noqa: BLE001 - any parser failure is the file's
        raise DocumentRefused(f"{name} is not a readable Excel file ({type(exc).__name__}: {str(exc)[:120]})") from None
    units: list[Unit] = []
    names = list(book.sheetnames)
    for n, title in enumerate(names, 1):
        ws = book[title]
        start = ws.min_row or 1
        rows = ((start + i, [_cell(v) for v in row]) for i, row in enumerate(ws.iter_rows(values_only=True)))
        header, body, width = _table(rows, name)
        last = column_letter(max(1, width))
        for block in _row_blocks(body, header, MAX_WORDS):
            cells = f"A{block[0][0]}:{last}{block[-1][0]}"
            units.append(Unit(sheet(title, cells), [title], [line for _, line in block], header=header))
        progress(done=n, total=len(names), unit="sheets")
    book.close()
    return units, {"sheets": names}


def read_csv(text: str, name: str, progress: Callable[..., None]) -> tuple[list[Unit], dict[str, Any]]:
    try:
        dialect: Any = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel_tab if name.lower().endswith(".tsv") else csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    rows = []
    try:
        for values in reader:
            rows.append((reader.line_num, [_cell(v) for v in values]))
    except csv.Error as exc:
        raise DocumentRefused(f"{name} is not a readable CSV file ({exc})") from None
    header, body, _ = _table(rows, name)
    units = []
    for block in _row_blocks(body, header, MAX_WORDS):
        units.append(Unit(f"lines:{block[0][0]}-{block[-1][0]}", [], [line for _, line in block], header=header,
                          first_line=0))
    progress(done=1, total=1, unit="files")
    return units, {"columns": header}
