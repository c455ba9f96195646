"""A picture of an OM's memory plan (`ge inspect --plot FILE.svg|.png`): one box per tensor, its
step range across (producer to last reader) and its bytes up (offset to offset + size), one panel
per region, coloured by region, the feature map's lower bound marked. SVG is written as text;
PNG is rasterized here (its text in a 5x7 bitmap font, bitmap_font.py) and encoded with zlib, so no
plotting library is needed."""
from __future__ import annotations

import struct
import zlib

from .bitmap_font import ADVANCE, GLYPH_HEIGHT, text_pixels

COLOURS = {"FEATURE_MAP": (76, 120, 168), "INPUT": (84, 162, 75), "OUTPUT": (228, 87, 86),
           "WORKSPACE": (238, 202, 59), "WEIGHT": (178, 121, 162), "FILE_CONSTANT": (157, 117, 93)}
WIDTH, PANEL_HEIGHT, MARGIN = 960, 320, 60
PNG_TEXT_SCALE = 2  # the bitmap font's pixels are 2x2 in the PNG
BOUND_LABEL = "lower bound"


def boxes(d: dict) -> tuple[list[dict], int]:
    """(one box per planned, non-alias tensor with size, the number of steps) from api.inspect data."""
    rows = [a for a in d["allocations"] if not a["alias_of"] and a["size"] > 0]
    steps = max([a["last"] for a in rows] + [len(d["tasks"]) - 1, 0]) + 1
    return rows, steps


def plot_svg(d: dict) -> str:
    rows, steps = boxes(d)
    panels = _panels(rows)
    height = MARGIN + len(panels) * (PANEL_HEIGHT + MARGIN)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH + 2 * MARGIN}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{MARGIN}" y="24" font-size="14">{_esc(_title(d))}</text>']
    for k, (kind, items, top) in enumerate(panels):
        y0 = MARGIN + k * (PANEL_HEIGHT + MARGIN)
        scale_y = PANEL_HEIGHT / max(top, 1)
        out.append(f'<rect x="{MARGIN}" y="{y0}" width="{WIDTH}" height="{PANEL_HEIGHT}" fill="none" stroke="#888"/>')
        out.append(f'<text x="{MARGIN}" y="{y0 - 6}">{_esc(_panel_label(kind, items, top))}</text>')
        for a in items:
            x, w = _x(a["first"], steps), _x(a["last"] + 1, steps) - _x(a["first"], steps)
            h = max(a["size"] * scale_y, 1.0)
            y = y0 + PANEL_HEIGHT - (a["offset"] * scale_y) - h
            r, g, b = COLOURS.get(a["kind"], (128, 128, 128))
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 1):.1f}" height="{h:.1f}" '
                       f'fill="rgb({r},{g},{b})" fill-opacity="0.75" stroke="#222" stroke-width="0.3">'
                       f'<title>{_esc(a["tensor"])}: {a["size"]} B at offset {a["offset"]}, steps '
                       f'{a["first"]}..{a["last"]}</title></rect>')
        bound = d.get("feature_map_lower_bound") or 0
        if kind == "FEATURE_MAP" and bound:
            y = y0 + PANEL_HEIGHT - bound * scale_y
            out.append(f'<line x1="{MARGIN}" x2="{MARGIN + WIDTH}" y1="{y:.1f}" y2="{y:.1f}" stroke="black" '
                       f'stroke-dasharray="6 4"/><text x="{MARGIN + WIDTH + 4}" y="{y:.1f}">{BOUND_LABEL}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def plot_png(d: dict) -> bytes:
    rows, steps = boxes(d)
    panels = _panels(rows)
    height = MARGIN + len(panels) * (PANEL_HEIGHT + MARGIN)
    width = WIDTH + 2 * MARGIN
    pixels = bytearray(b"\xff" * (width * height * 3))

    def fill(x0, y0, x1, y1, rgb):
        x0, x1 = max(0, int(x0)), min(width, max(int(x1), int(x0) + 1))
        y0, y1 = max(0, int(y0)), min(height, max(int(y1), int(y0) + 1))
        row = bytes(rgb) * (x1 - x0)
        for y in range(y0, y1):
            start = (y * width + x0) * 3
            pixels[start:start + len(row)] = row

    def write(text: str, x, bottom) -> None:
        top = bottom - GLYPH_HEIGHT * PNG_TEXT_SCALE
        for dx, dy, side in text_pixels(text, PNG_TEXT_SCALE):
            fill(x + dx, top + dy, x + dx + side, top + dy + side, (0, 0, 0))

    write(_title(d), MARGIN, 24)
    for k, (kind, items, top) in enumerate(panels):
        y0 = MARGIN + k * (PANEL_HEIGHT + MARGIN)
        scale_y = PANEL_HEIGHT / max(top, 1)
        write(_panel_label(kind, items, top), MARGIN, y0 - 6)
        for edge in ((MARGIN, y0, MARGIN + WIDTH, y0 + 1), (MARGIN, y0 + PANEL_HEIGHT, MARGIN + WIDTH, y0 + PANEL_HEIGHT + 1),
                     (MARGIN, y0, MARGIN + 1, y0 + PANEL_HEIGHT), (MARGIN + WIDTH, y0, MARGIN + WIDTH + 1, y0 + PANEL_HEIGHT)):
            fill(*edge, (136, 136, 136))
        for a in items:
            x0, x1 = _x(a["first"], steps), _x(a["last"] + 1, steps)
            h = max(a["size"] * scale_y, 1.0)
            y1 = y0 + PANEL_HEIGHT - a["offset"] * scale_y
            fill(x0, y1 - h, x1, y1, COLOURS.get(a["kind"], (128, 128, 128)))
            fill(x0, y1 - h, x1, y1 - h + 1, (34, 34, 34))
        bound = d.get("feature_map_lower_bound") or 0
        if kind == "FEATURE_MAP" and bound:
            y = y0 + PANEL_HEIGHT - bound * scale_y
            for x in range(MARGIN, MARGIN + WIDTH, 10):
                fill(x, y, x + 6, y + 1, (0, 0, 0))
            write(BOUND_LABEL, MARGIN + WIDTH - len(BOUND_LABEL) * ADVANCE * PNG_TEXT_SCALE - 4, y - 3)
    raw = b"".join(b"\x00" + bytes(pixels[y * width * 3:(y + 1) * width * 3]) for y in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def _title(d: dict) -> str:
    return f'memory plan of {d["header"].get("name", "")}: offset (up) against step (across)'


def _panel_label(kind: str, items: list, top: int) -> str:
    return f"{kind}: {top} bytes, {len(items)} tensors"


def _panels(rows: list[dict]) -> list[tuple[str, list[dict], int]]:
    """Feature maps first (the planned arena), then the other regions that hold tensors."""
    order = ["FEATURE_MAP", "WORKSPACE", "INPUT", "OUTPUT", "WEIGHT", "FILE_CONSTANT"]
    out = []
    for kind in sorted({a["kind"] for a in rows}, key=lambda k: order.index(k) if k in order else len(order)):
        items = [a for a in rows if a["kind"] == kind]
        out.append((kind, items, max(a["offset"] + a["size"] for a in items)))
    return out


def _x(step: int, steps: int) -> float:
    return MARGIN + WIDTH * step / max(steps, 1)


def _esc(s: str) -> str:
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
