"""The tiny world's tokenizer: one token per character, plus Qwen3's special tokens.

Built locally with the `tokenizers` library (nothing is downloaded) and wrapped as a
`transformers.PreTrainedTokenizerFast`, so `save_pretrained` / `AutoTokenizer.from_pretrained`
round-trip it like a real Qwen3 tokenizer. The vocabulary is:

    ids 0..5    <|endoftext|> <|im_start|> <|im_end|> <think> </think> <unk>
    ids 6..     newline and the 95 printable ASCII characters, one token each

`<|endoftext|>` is the pad token and the base-model stop token; `<|im_end|>` is eos (the
chat stop token). `<think>` / `</think>` are added tokens that are *not* special, as in
Qwen3, so `decode(..., skip_special_tokens=True)` keeps them. The chat template is a
Qwen3-style Jinja template that honours `enable_thinking` (see CHAT_TEMPLATE).
"""

from __future__ import annotations

import string

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
UNK = "<unk>"

SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END, THINK_OPEN, THINK_CLOSE, UNK)
CHARACTERS = ("\n",) + tuple(c for c in string.printable if c not in "\t\n\r\x0b\x0c")

# Qwen3's template reduced to what the tiny world uses: plain role blocks, and with
# `enable_thinking=False` the empty think block that Qwen3 appends to the generation prompt.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)


def vocabulary() -> dict[str, int]:
    """Token string → id: the special tokens first, then one entry per character."""
    return {token: i for i, token in enumerate(SPECIAL_TOKENS + CHARACTERS)}


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A character-level tokenizer with Qwen3's special tokens and chat template.

    Every character of the text becomes one token (`[\\s\\S]` split, isolated); the
    special tokens are matched first, whole. Decoding concatenates the pieces unchanged.
    """
    backend = Tokenizer(models.WordLevel(vocabulary(), unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in (ENDOFTEXT, IM_START, IM_END, UNK)]
    )
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in (THINK_OPEN, THINK_CLOSE)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=UNK,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=1024,
        padding_side="left",
    )
