"""Hidden HTML is dropped, never stored as ordinary text (app/sensors/text.py), in feed items
(parsed by the real feed sensor from a local file) as in HTML files."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from app.sensors.base import FeedSpec
from app.sensors.feeds import FeedSensor
from app.sensors.text import html_text, html_to_text

HIDDEN = [
    '<div style="display:none">SECRET</div>', '<div style="DISPLAY: None !important">SECRET</div>',
    '<span style="visibility:hidden">SECRET</span>', '<span style="visibility: collapse">SECRET</span>',
    "<span hidden>SECRET</span>", '<span hidden="until-found">SECRET</span>', '<p aria-hidden="true">SECRET</p>',
    '<p style="font-size:0">SECRET</p>', '<p style="font-size: 0.5px">SECRET</p>', '<p style="opacity:0">SECRET</p>',
    '<p style="opacity: 0.01">SECRET</p>', '<p style="color: transparent">SECRET</p>',
    '<p style="height:0;overflow:hidden">SECRET</p>', '<p style="clip: rect(0 0 0 0); position:absolute">SECRET</p>',
    '<p style="clip-path: inset(50%)">SECRET</p>', '<p style="transform: scale(0)">SECRET</p>',
    '<p style="position:absolute; left:-9999px">SECRET</p>', '<p style="text-indent:-10000px">SECRET</p>',
    "<template><p>SECRET</p></template>", "<iframe src='x'>SECRET</iframe>", "<object data='x'>SECRET</object>",
    "<noscript>SECRET</noscript>", "<video>SECRET</video>", "<dialog>SECRET</dialog>",
    '<p class="sr-only">SECRET</p>', '<p class="visually-hidden">SECRET</p>', '<p class="d-none">SECRET</p>',
    "<style>.x{display:none}</style><p class='x'>SECRET</p>",
    "<style>#y { visibility: hidden }</style><p id='y'>SECRET</p>",
    "<style>/* c */ div.note , aside { font-size: 0 }</style><aside>SECRET</aside><div class='note'>SECRET</div>",
    "<style>@media screen { .m { display: none } }</style><p class='m'>SECRET</p>",
    "<div hidden><p>SECRET</p></span>SECRET</div>",  # a stray end tag never ends the hidden element
    "<div hidden>SECRET",  # never closed: hidden to the end
    "<script>SECRET</script>", "<!-- SECRET -->",
]


@pytest.mark.parametrize("markup", HIDDEN)
def test_hidden_content_is_dropped(markup: str) -> None:
    text, hidden = html_text(f"<p>Visible start.</p>{markup}<p>Visible end.</p>")
    assert "SECRET" not in text
    assert text.startswith("Visible start.")
    if "<script" not in markup and "<!--" not in markup:
        assert hidden >= 1
    if "<div hidden>SECRET" != markup:
        assert text.endswith("Visible end.")


def test_visible_content_is_kept() -> None:
    page = ("<style>.x{color:red}</style><p class='x'>Red text.</p><details><summary>More</summary>Shown on click"
            "</details><p style='display:block;font-size:12px;opacity:1'>Plain.</p><dialog open>Open dialog</dialog>"
            "<ul><li>a<li>b</ul>")
    text, hidden = html_text(page)
    assert hidden == 0
    for part in ("Red text.", "More", "Shown on click", "Plain.", "Open dialog", "- a", "- b"):
        assert part in text
    assert html_to_text("plain &amp; simple") == "plain & simple"


def test_feed_items_drop_hidden_html_through_the_feed_sensor(tmp_path: Path) -> None:
    """feedparser's own sanitizer would keep the text of these elements (it drops the markers
    that hide them); the sensor parses unsanitised and the stripper drops them."""
    bodies = ['<span style="visibility:hidden">HIDDEN1</span>', '<span aria-hidden="true">HIDDEN2</span>',
              '<p style="opacity:0">HIDDEN3</p>', "<template>HIDDEN4</template>", "<iframe>HIDDEN5</iframe>",
              "<object>HIDDEN6</object>", "<style>.x{display:none}</style><p class='x'>HIDDEN7</p>",
              "<script>HIDDEN8</script>"]
    items = "".join(f"<item><title>Item {n}</title><guid>g{n}</guid><description>"
                    f"{html.escape('<p>Story ' + str(n) + '.</p>' + body)}</description></item>"
                    for n, body in enumerate(bodies))
    feed = tmp_path / "feed.xml"
    feed.write_text(f'<?xml version="1.0"?><rss version="2.0"><channel><title>T</title>{items}</channel></rss>',
                    encoding="utf-8")
    changes: list = []
    assert FeedSensor([FeedSpec(str(feed))], changes.append).poll_once(0) == len(bodies)
    for change in changes:
        assert "HIDDEN" not in change.content and "HIDDEN" not in change.title
        assert "Story" in change.content
