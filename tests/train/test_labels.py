from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from train.labels import CONTEXT, LabelError, choose_label_set, label_token_id, verify_label_map


def _char_tokenizer() -> PreTrainedTokenizerFast:
    """Every character is its own token; no uppercase letters in the vocabulary."""
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789: ")
    vocab = {"[UNK]": 0, **{c: i + 1 for i, c in enumerate(chars)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


def test_smollm2_splits_two_digit_ids(smollm2_tokenizer):
    for i in range(10):
        assert label_token_id(smollm2_tokenizer, str(i)) is not None
    for i in range(10, 21):
        assert label_token_id(smollm2_tokenizer, str(i)) is None
        extra = (len(smollm2_tokenizer.encode(CONTEXT + str(i), add_special_tokens=False))
                 - len(smollm2_tokenizer.encode(CONTEXT, add_special_tokens=False)))
        assert extra == 2, f"{i} should be two tokens after the context"
    with pytest.raises(LabelError, match="agent 10 is not one token"):
        verify_label_map(smollm2_tokenizer, {i: str(i) for i in range(21)})


def test_smollm2_gets_letters(smollm2_tokenizer):
    labels = choose_label_set(smollm2_tokenizer)
    assert labels.kind == "letters_space"
    assert labels.label_map[0] == " A" and labels.label_map[20] == " U"
    assert len(set(labels.token_ids)) == 21 and not labels.added_tokens
    for agent, label in labels.label_map.items():
        ids = smollm2_tokenizer.encode("prompt\nSelected Agent:" + label, add_special_tokens=False)
        assert ids[-1] == labels.token_ids[agent]


def test_fallback_to_special_tokens():
    tok = _char_tokenizer()
    labels = choose_label_set(tok)
    assert labels.kind == "special" and labels.added_tokens
    assert len(set(labels.token_ids)) == 21
    assert verify_label_map(tok, labels.label_map) == labels.token_ids


def test_refuses_without_valid_set():
    with pytest.raises(LabelError, match="no single-token label set"):
        choose_label_set(_char_tokenizer(), allow_added_tokens=False)


def test_incomplete_map_rejected(smollm2_tokenizer):
    with pytest.raises(LabelError, match="0..20"):
        verify_label_map(smollm2_tokenizer, {i: f" {chr(65 + i)}" for i in range(20)})
