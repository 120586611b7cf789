"""A model's input (certkit.models): token ids of a text through the model's own tokenizer with its
special tokens, token ids given as they are, certkit's built-in text (the Python reference topics),
cut into windows of a length the model allows; the text and token files of the command line; the
sha256 of an input (inputs: all of it at once)."""
import hashlib
import io
import os

import numpy as np

from ..errors import InputError, UserError
from .files import ModelError
from .loading import first_line, tokenizer_file

def encode(tok, txt, special, what):
    """tok's token ids of txt (special: with its special tokens); a tokenizer that fails on it (a
    WordLevel vocabulary without its unk token, ...) is a ModelError naming its file and `what`."""
    try:
        return tok(txt, add_special_tokens=special, verbose=False)["input_ids"]
    except MemoryError:
        raise
    except Exception as e:
        raise ModelError(f"{tokenizer_file(tok)}: the tokenizer fails on {what} ({first_line(e)}); give token ids "
                         f"instead (--tokens FILE, or tokens=...)") from None


def builtin_text():
    """(text, sha256): the Python reference topics joined in sorted key order (deterministic, offline)."""
    import pydoc_data.topics as tp
    t = "\n\n".join(tp.topics[k] for k in sorted(tp.topics))
    return t, hashlib.sha256(t.encode("utf-8")).hexdigest()


text = builtin_text          # the calibration grid's name for it


def token_window(tok, kind, length, offset=0):
    """The calibration grid's window: length token ids, [CLS] + the built-in text from `offset` +
    [SEP] (MPNet: <s> ... </s>)."""
    t, _ = builtin_text()
    ids = encode(tok, t, False, "the built-in text")
    body = ids[offset: offset + length - 2]
    if len(body) < length - 2:
        raise ModelError(f"length {length}: the text has only {len(ids) - offset} tokens from offset {offset}")
    cls, sep = (tok.cls_token_id, tok.sep_token_id) if kind == "bert" else (0, 2)
    return [cls] + body + [sep]


def special_tokens(tok):
    """(prefix, suffix): the ids the tokenizer adds around a text on its own (BERT [CLS] .. [SEP],
    RoBERTa/MPNet <s> .. </s>, Llama <s> .., GPT-2 nothing), read from the tokenizer itself."""
    bare = encode(tok, "certkit", False, "the word 'certkit'")
    full = encode(tok, "certkit", True, "the word 'certkit'")
    for i in range(len(full) - len(bare) + 1):
        if full[i:i + len(bare)] == bare:
            return list(full[:i]), list(full[i + len(bare):])
    return [], []


def check_length(length, info, what="length"):
    """length as an int in 2..the model's maximum (UserError naming `what` and the value)."""
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 2:
        raise UserError(f"{what}: {length!r}: must be an integer >= 2")
    top = info.get("max_length")
    if top is not None and length > top:
        raise UserError(f"{what} {length}: above the maximum of {info['name']}, {top} positions "
                        f"(config.max_position_embeddings)")
    return int(length)


def text_ids(tok, info, txt, length, window=0, source="text"):
    """(ids, offset): window number `window` (0 = the first) of the text cut into windows of
    `length` tokens, each the tokenizer's own special tokens around length - #specials text tokens."""
    if tok is None:
        raise no_tokenizer(info, source)
    if not isinstance(txt, str) or not txt.strip():
        raise UserError(f"{source}: empty text")
    pre, suf = special_tokens(tok)
    body = length - len(pre) - len(suf)
    if body < 1:
        raise UserError(f"length {length}: leaves no room for text between the {len(pre) + len(suf)} special tokens")
    ids = encode(tok, txt, False, source)
    V = info.get("vocab_size")
    if V and max(ids + pre + suf, default=0) >= V:
        raise ModelError(f"{source}: the tokenizer gives id {max(ids + pre + suf)}, outside the vocabulary of "
                         f"{info['name']} (0..{V - 1}): a tokenizer of another model?")
    need = (window + 1) * body
    if len(ids) < need:
        raise UserError(f"{source}: too short: {len(ids)} tokens, and window {window} at length {length} needs "
                        f"{need} ({body} text tokens a window besides {len(pre) + len(suf)} special tokens)")
    return pre + list(ids[window * body: need]) + suf, window * body


def no_tokenizer(info, source):
    if info.get("tokenizer_refused"):
        return ModelError(f"{source}: {info['name']} has tokenizer files, but certkit refused them "
                          f"({info['tokenizer_refused']}); give token ids instead (--tokens FILE, or tokens=...)")
    where = f" {info['folder']}" if info.get("folder") else ""
    return ModelError(f"{source}: {info['name']} has no tokenizer (no tokenizer files in the model folder{where}); "
                      f"give token ids instead (--tokens FILE, or tokens=...)")


def token_ids(tokens, info, length, window=0, source="tokens"):
    """(ids, offset): tokens[window*length : (window+1)*length], each an int in 0..vocab_size-1."""
    a = np.asarray(tokens)
    if a.size == 0:
        raise UserError(f"{source}: no token ids")
    if a.dtype.kind not in "iu" or a.ndim != 1:
        raise UserError(f"{source}: expected a 1-D list of integer token ids, got dtype {a.dtype} and shape {a.shape}")
    V = info.get("vocab_size")
    bad = np.flatnonzero((a < 0) | (a >= V if V else False))
    if bad.size:
        raise UserError(f"{source}: token id {int(a[bad[0]])} at position {int(bad[0])} is outside 0..{V - 1} "
                        f"(the vocabulary of {info['name']})")
    need = (window + 1) * length
    if a.size < need:
        raise UserError(f"{source}: too short: {a.size} token ids, and window {window} at length {length} needs {need}")
    return [int(t) for t in a[window * length: need]], window * length


def read_text_file(path, what="--text"):
    """The text of a UTF-8 file (InputError if missing or unreadable, UserError if empty or not UTF-8)."""
    raw = _read(path, what)
    try:
        t = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {path}: not UTF-8 text (byte {e.start})") from None
    if not t.strip():
        raise UserError(f"{what} {path}: the file is empty")
    return t


def read_tokens_file(path, what="--tokens"):
    """Token ids from a .npy integer array (no pickle) or a text file of integers separated by
    whitespace or commas."""
    raw = _read(path, what)
    if str(path).endswith(".npy"):
        try:
            a = np.load(io.BytesIO(raw), allow_pickle=False)
        except Exception as e:
            raise UserError(f"{what} {path}: unreadable .npy ({e})") from None
        if a.dtype.kind not in "iu":
            raise UserError(f"{what} {path}: dtype {a.dtype}: token ids must be integers")
        a = a.reshape(-1)
    else:
        parts = raw.decode("utf-8", errors="replace").replace(",", " ").split()
        bad = next((p for p in parts if not p.lstrip("+-").isdigit() or len(p) > 12), None)
        if bad is not None:
            raise UserError(f"{what} {path}: {bad[:40]!r} is not an integer token id"
                            + (" (at most 12 digits)" if bad.lstrip("+-").isdigit() else "")) from None
        a = np.array([int(p) for p in parts], dtype=np.int64)
    if a.size == 0:
        raise UserError(f"{what} {path}: the file holds no token ids")
    return a


def _read(path, what):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"{what} {path}: no such file")
    if not os.path.isfile(path):
        raise InputError(f"{what} {path}: not a regular file")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"{what} {path}: cannot read ({e.strerror})") from None


def sha256_of(txt=None, ids=None):
    """sha256 of the text (UTF-8), or of the token ids written as decimal numbers separated by spaces."""
    data = txt if txt is not None else " ".join(str(int(t)) for t in ids)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def inputs(tok, info, text=None, tokens=None, length=128, window=0, what=("text", "tokens", "length")):
    """(ids, sha256, offset) of the model's input: window `window` of `tokens` (ids, used as given)
    or of `text` (tokenised, with the tokenizer's special tokens), or of certkit's built-in text when
    both are None.  Errors name the argument (`what`: the names to use for text, tokens, length)."""
    if tokens is None and tok is None:
        raise no_tokenizer(info, what[0] if text is not None else "the built-in text")
    length = check_length(length, info, what[2])
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 0:
        raise UserError(f"window: {window!r}: must be an integer >= 0")
    if text is not None and tokens is not None:
        raise UserError(f"give {what[0]} or {what[1]}, not both")
    if tokens is not None:
        ids, off = token_ids(tokens, info, length, window, what[1])
        return ids, sha256_of(ids=np.asarray(tokens).reshape(-1)), off
    if text is None:
        text, sha = builtin_text()
    else:
        sha = sha256_of(text)
    ids, off = text_ids(tok, info, text, length, window, what[0])
    return ids, sha, off
