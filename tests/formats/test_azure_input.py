"""Azure AI evaluation data (seed 003): single-turn QA and multi-turn conversations with citations."""

from pathlib import Path

from assay.formats import open_dataset
from assay.records import Document, Message

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_seed_single_turn_qa_question_answer_context_ground_truth():
    ds = open_dataset(FIX / "azure_qa.jsonl")
    (r,) = list(ds)
    assert r.query == "Which tent is the most waterproof?"
    assert r.response == "The Alpine Explorer Tent is the most waterproof."
    assert r.contexts == [Document(content="From our product list, the Alpine Explorer tent is the most waterproof. "
                                           "The Adventure Dining Table has higher weight.")]
    assert r.context_text().startswith("From our product list")
    assert r.ground_truth == "The Alpine Explorer Tent has the highest rainfly waterproof rating at 3000m"
    assert r.extra == {} and r.history is None and r.id == "0"  # the row index when the row has no id
    assert ds.format == "jsonl" and ds.rows_read == 1 and ds.bad_rows == []
    assert ds.columns_seen == {"question", "context", "answer", "ground_truth"}


def test_query_response_names_and_unknown_columns_kept_in_extra():
    a, b = list(open_dataset(FIX / "azure_qa_query_response.jsonl"))
    assert a.query == "Which tent is the most waterproof?" and a.response.startswith("The Alpine Explorer")
    assert len(a.contexts) == 1 and a.ground_truth.endswith("3000m")
    assert a.extra == {"category": "tents", "difficulty": 2}
    assert b.query == "What is the capital of France?" and b.contexts is None and b.ground_truth is None


def test_canonical_name_wins_over_azure_alias_and_the_other_is_kept():
    (r,) = list(open_dataset([{"query": "canonical", "question": "alias", "answer": "a"}]))
    assert r.query == "canonical" and r.response == "a"
    assert r.extra == {"question": "alias"}
    (r,) = list(open_dataset([{"question": "alias", "query": "canonical"}]))
    assert r.query == "canonical" and r.extra == {"question": "alias"}


def test_seed_conversation_with_citations():
    ds = open_dataset(FIX / "azure_conversation.jsonl")
    (r,) = list(ds)
    assert r.query == "How can I check the status of my online order?"
    assert r.response.startswith("Hi Sarah Lee! To check the status of your online order")
    assert r.response.endswith("1-800-555-1234.\n")
    assert r.history is None
    assert r.conversation_id == "0" and r.turn == 0 and r.id == "0#0"
    (doc,) = r.contexts
    assert doc.id == "cHJvZHVjdF9pbmZvXzYubWQz"
    assert doc.title == "Information about product item_number: 6"
    assert doc.content.startswith("# Information about product item_number: 6")
    assert "EcoFire Camping Stove" in doc.content
    assert ds.rows_read == 1


def test_multi_turn_conversation_one_record_per_assistant_turn():
    ds = open_dataset(FIX / "azure_conversation_multiturn.jsonl")
    recs = list(ds)
    assert ds.rows_read == 3  # a conversation row counts once
    sarah = [r for r in recs if r.conversation_id == "conv-sarah"]
    assert [r.id for r in sarah] == ["conv-sarah#0", "conv-sarah#1"]
    assert [r.turn for r in sarah] == [0, 1]
    t0, t1 = sarah
    assert t0.query == "How can I check the status of my online order?"
    assert t0.history == [Message(role="system", content="You are the Contoso Trek outdoor-gear assistant.")]
    assert t0.contexts[0].doc_uri == "https://contosotrek.example/help/orders"  # citation url
    assert t1.query == "And how do I clean the EcoFire Camping Stove?"
    assert [m.role for m in t1.history] == ["system", "user", "assistant"]
    assert t1.history[2].context["citations"][0]["title"] == "Orders and tracking"  # Azure citations kept
    assert t1.response == "Let it cool completely, then wipe away ash or debris with a brush or cloth."
    assert [d.doc_uri for d in t1.contexts] == ["product_info_6.md", "cHJvZHVjdF9pbmZvXzYubWQ0"]
    assert t1.contexts[1].content == "Store the stove in a dry place when not in use."
    # the row's ground truth describes the final answer; other columns go to every turn
    assert t0.ground_truth is None and t1.ground_truth.startswith("Let it cool")
    assert t0.extra == t1.extra == {"channel": "web"}


def test_conversation_wrapper_with_string_and_conversation_level_context():
    recs = [r for r in open_dataset(FIX / "azure_conversation_multiturn.jsonl") if r.conversation_id == "1"]
    t0, t1 = recs
    assert t0.contexts == [
        Document(content="From our product list, the Alpine Explorer tent is the most waterproof.")]
    assert t1.contexts == [
        Document(content="The Alpine Explorer Tent has the highest rainfly waterproof rating at 3000m.")]
    assert t1.query == "What is its rainfly rating?" and len(t1.history) == 2


def test_tool_calling_turns_and_unanswered_last_user_message():
    recs = [r for r in open_dataset(FIX / "azure_conversation_multiturn.jsonl") if r.conversation_id == "2"]
    t0, t1 = recs
    assert t0.query == "Is the TrailMaster X4 Tent in stock?"  # content parts joined into text
    assert t0.response == "Yes, 12 are in stock."
    # the OpenAI tool call in the canonical shape, its arguments parsed, the tool message's result attached
    assert t0.tool_calls == [{"type": "tool_call", "tool_call_id": "call_1", "name": "check_stock",
                              "arguments": {"item": "TrailMaster X4"}, "result": {"in_stock": 12}}]
    assert [m.role for m in t0.steps] == ["assistant", "tool", "assistant"]
    assert t1.query == "Great, can you reserve one?" and t1.response is None
    assert [m.role for m in t1.history] == ["user", "assistant", "tool", "assistant"]


def test_conversation_id_from_id_column_or_row_index():
    rows = [{"query": "flat", "response": "row"},
            {"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]},
            {"conversation_id": 77,
             "messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]}]
    _, c1, c2 = list(open_dataset(rows))
    assert (c1.conversation_id, c1.id) == ("1", "1#0")
    assert (c2.conversation_id, c2.id) == ("77", "77#0")
