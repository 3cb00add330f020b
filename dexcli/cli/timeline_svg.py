"""`dex inspect ID --timeline --svg FILE`: the timeline's lines as an SVG picture.

Written here rather than with Rich's `save_svg`, whose picture depends on what the viewer does
with it: it loads its font from the internet (nothing, or another font, offline), and places
each run of text by its first character only, spaces written as non-breaking spaces — librsvg
(rsvg-convert, GNOME's viewers) drops leading ones, so labels moved over the step names.

Here every character is its own `<text>` at its own column's x: the picture's grid does not
depend on the font's advance widths, on how a viewer treats spaces (none are written), or on
which font it finds; the font is a stack of common monospace fonts ending in the generic
`monospace`, so it renders offline and the same in Chromium and librsvg.
"""

from __future__ import annotations

from html import escape

from rich.cells import cell_len
from rich.color import blend_rgb
from rich.console import Console
from rich.style import Style
from rich.terminal_theme import SVG_EXPORT_THEME
from rich.text import Text

FONT_FAMILY = "'DejaVu Sans Mono', Menlo, Consolas, 'Liberation Mono', 'Noto Sans Mono', monospace"
FONT_SIZE = 14.0
CELL_W = FONT_SIZE * 0.6021  # DejaVu Sans Mono's advance: box-drawing runs join up in it
LINE_H = FONT_SIZE * 1.3
PAD = 14.0
THEME = SVG_EXPORT_THEME


def _fill(style: Style) -> str:
    color = THEME.foreground_color if style.color is None or style.color.is_default else \
        style.color.get_truecolor(THEME)
    if style.dim:  # as a terminal draws dim text: towards the background
        color = blend_rgb(color, THEME.background_color, 0.4)
    return color.hex


def timeline_svg(lines: list[Text], width: int, title: str) -> str:
    """An SVG of `lines` (each at most `width` cells) on a dark terminal-like background,
    `title` above them."""
    console = Console(width=width, color_system="truecolor", force_terminal=True, no_color=False)
    title_h = LINE_H * 1.6
    w = PAD * 2 + CELL_W * width
    h = title_h + PAD + LINE_H * len(lines)
    bg = THEME.background_color.hex
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
           f'viewBox="0 0 {w:.1f} {h:.1f}" font-family="{escape(FONT_FAMILY)}" font-size="{FONT_SIZE:g}">',
           f"<title>{escape(title)}</title>",
           f'<rect width="100%" height="100%" rx="8" fill="{bg}"/>',
           f'<text x="{w / 2:.1f}" y="{title_h * 0.7:.1f}" text-anchor="middle" '
           f'fill="{blend_rgb(THEME.foreground_color, THEME.background_color, 0.6).hex}">{escape(title)}</text>']
    for row, line in enumerate(lines):
        y = title_h + PAD + LINE_H * row + FONT_SIZE * 0.8
        col = 0
        for seg in line.render(console, end=""):
            style = seg.style or Style()
            attrs = f'fill="{_fill(style)}"' + (' font-weight="bold"' if style.bold else "")
            cells = []
            for ch in seg.text:
                if not ch.isspace():
                    cells.append(f'<text x="{PAD + CELL_W * col:.2f}" y="{y:.2f}">{escape(ch)}</text>')
                col += cell_len(ch)
            if cells:
                out.append(f"<g {attrs}>{''.join(cells)}</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
