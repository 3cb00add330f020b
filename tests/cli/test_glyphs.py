"""Every glyph dex draws exists in DejaVu Sans Mono (the common default monospace font): a
character missing from it shows as a box or in a fallback font of another width, which breaks
the alignment of the live view and the timeline."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRAWN = sorted([*(ROOT / "dexcli" / "cli").glob("*.py"), *(ROOT / "dexcli" / "graph").glob("*.py")])
# checked against DejaVuSansMono.ttf (fonts-dejavu 2.37) by test_the_allowed_glyphs_are_in_the_font
ALLOWED = set("·—…→↺∞⊘─━│└┼├┤█░▶◉○●♥✉✓✗╳╌═↳")
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")


def test_dex_draws_only_glyphs_known_to_be_in_dejavu_sans_mono():
    found = {(c, p.name) for p in DRAWN for c in p.read_text(encoding="utf-8") if ord(c) > 127}
    unknown = {pair for pair in found if pair[0] not in ALLOWED}
    assert not unknown, f"{unknown}: check the font, then add them to ALLOWED"


@pytest.mark.skipif(shutil.which("fc-query") is None or not FONT.exists(), reason="needs fc-query and DejaVu Sans Mono")
def test_the_allowed_glyphs_are_in_the_font():
    ranges = []
    charset = subprocess.run(["fc-query", "--format=%{charset}", str(FONT)], capture_output=True, text=True,
                             check=True).stdout
    for part in charset.split():
        lo, _, hi = part.partition("-")
        ranges.append((int(lo, 16), int(hi or lo, 16)))
    missing = [c for c in ALLOWED if not any(lo <= ord(c) <= hi for lo, hi in ranges)]
    assert not missing
    assert not any(lo <= ord("⟳") <= hi for lo, hi in ranges)  # the one that was drawn before
