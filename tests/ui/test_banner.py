"""The routing banner names turns by their text, never by id, and shows that text as text."""

from __future__ import annotations

from app.core.routing.anchor import AnchorCandidate, AnchorRouter
from app.ui.composer import RoutingBanner

LISBON, QUICKSORT = "a" * 32, "b" * 32


def test_an_ambiguous_choice_names_the_rival_turns_by_their_escaped_text(qtbot) -> None:
    decision = AnchorRouter().route([
        AnchorCandidate(node_id=LISBON, features={"sem": 0.9}),
        AnchorCandidate(node_id=QUICKSORT, features={"sem": 0.88}),
    ])
    assert decision.ambiguous and LISBON in (decision.clarification or "")  # the record keeps ids
    banner = RoutingBanner()
    qtbot.addWidget(banner)
    labels = {LISBON: "Back to Lisbon: <b>day trip</b>", QUICKSORT: "Explain quicksort"}
    banner.show_routing("t1", decision.model_dump(mode="json"), labels)
    text = banner.summary.text()
    assert LISBON not in text and QUICKSORT not in text
    assert "«Back to Lisbon: &lt;b&gt;day trip&lt;/b&gt;»" in text and "«Explain quicksort»" in text
    assert "Not sure:" in text
    buttons = [banner.choices.itemAt(i).widget() for i in range(banner.choices.count())]
    assert [b.text() for b in buttons if b is not None][-1] == "New branch"


def test_the_banner_says_in_words_why_an_input_went_where_it_went(qtbot) -> None:
    banner = RoutingBanner()
    qtbot.addWidget(banner)
    labels = {LISBON: "Back to Lisbon", QUICKSORT: "Explain quicksort"}
    decision = AnchorRouter().route([
        AnchorCandidate(node_id=LISBON, features={"sem": 0.9, "recency": 1.0}),
        AnchorCandidate(node_id=QUICKSORT, features={"sem": 0.2}),
    ])
    banner.show_routing("t1", decision.model_dump(mode="json"), labels)
    text = banner.summary.text()
    assert text.startswith("<b>Continues «Back to Lisbon»</b> — close in meaning and recent (score 1.20")
    assert "next: «Explain quicksort» 0.20" in text and "sem=" not in text
    assert "sem=0.90" in banner.summary.toolTip()  # the router's figures stay one hover away
    unrelated = AnchorRouter().route([AnchorCandidate(node_id=QUICKSORT, features={"sem": 0.3})])
    banner.show_routing("t2", unrelated.model_dump(mode="json"), labels)
    assert banner.summary.text().startswith("<b>Starts a new branch</b> — no earlier turn was close enough")
    assert "(closest: «Explain quicksort» 0.30)" in banner.summary.text()
