"""sdload datasets: random prompts of a given token length, prompts read from a file, and a
shared-prefix mode. Each item is a Prompt: what to send (text or token ids) and its lengths."""
import dataclasses
import json
import pathlib
import random

# Ordinary English and code words: without a tokenizer, one word is roughly one token of a
# byte-level BPE vocabulary, which is close enough for a chat prompt's nominal length.
WORDS = ("the of and to in is that for it as with was on be by this are from or at an have not "
         "def class import return self value list data file time system model server request print "
         "error result test string number index point table user name state first last make use "
         "while yield async await lambda dict set tuple open read write close path line token").split()


@dataclasses.dataclass
class Prompt:
    text: str = None  # a text prompt, or
    ids: list = None  # a token-id prompt (completions only)
    input_len: int = 0  # nominal prompt tokens (the server's usage count is what gets reported)
    output_len: int = 16  # max_tokens


class Tokenizer:
    """A Hugging Face tokenizer.json through the `tokenizers` package (optional)."""

    def __init__(self, path):
        from tokenizers import Tokenizer as HF  # imported here: only needed with --tokenizer
        p = pathlib.Path(path)
        self.tok = HF.from_file(str(p / "tokenizer.json" if p.is_dir() else p))
        self.vocab = self.tok.get_vocab_size()
        special = {t.id for t in self.tok.get_added_tokens_decoder().values()} if hasattr(
            self.tok, "get_added_tokens_decoder") else set()
        self.special = special

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids):
        return self.tok.decode(ids)

    def random_ids(self, rng, n):
        out = []
        while len(out) < n:
            i = rng.randrange(self.vocab)
            if i not in self.special:
                out.append(i)
        return out


def random_text(rng, n, tok=None):
    """Text of about n tokens: random vocabulary ids decoded (re-encoded and cut to n), or words."""
    if tok is None:
        return " ".join(rng.choice(WORDS) for _ in range(n))
    ids = tok.random_ids(rng, n)
    for _ in range(4):  # decoding then encoding may merge or split tokens: converge on n
        ids = tok.encode(tok.decode(ids))[:n]
        if len(ids) < n:
            ids += tok.random_ids(rng, n - len(ids))
    return tok.decode(ids[:n])


def lengths(rng, mean, ratio):
    """A length uniform in [mean*(1-ratio), mean*(1+ratio)], at least 1."""
    lo, hi = max(1, int(mean * (1 - ratio))), max(1, int(mean * (1 + ratio)))
    return rng.randint(lo, hi)


def random_prompts(n, input_len, output_len, ratio=0.0, seed=0, tok=None, use_ids=False, vocab=None,
                   prefix_len=0, num_prefixes=1):
    """n random prompts. use_ids sends token ids (exact lengths; completions only): drawn from the
    tokenizer's vocabulary, else from [16, vocab). With prefix_len, each prompt starts with one of
    num_prefixes shared prefixes of prefix_len tokens (the shared-prefix / prompt-cache mode)."""
    rng = random.Random(seed)
    if use_ids and tok is None and not vocab:
        raise ValueError("token-id prompts need --tokenizer or --vocab-size")

    def ids_of(k):
        return tok.random_ids(rng, k) if tok else [rng.randrange(16, vocab) for _ in range(k)]

    prefixes = []
    for _ in range(num_prefixes if prefix_len else 0):
        prefixes.append(ids_of(prefix_len) if use_ids else random_text(rng, prefix_len, tok))
    out = []
    for i in range(n):
        il, ol = lengths(rng, input_len, ratio), lengths(rng, output_len, ratio)
        pre = prefixes[i % len(prefixes)] if prefixes else None
        if use_ids:
            out.append(Prompt(ids=(pre or []) + ids_of(il), input_len=il + prefix_len, output_len=ol))
        else:
            body = random_text(rng, il, tok)
            out.append(Prompt(text=(pre + " " + body) if pre else body, input_len=il + prefix_len, output_len=ol))
    return out


def file_prompts(path, n, output_len, seed=0, tok=None):
    """Prompts from a file: JSON lines with "prompt" (and optional "max_tokens"/"output_len"), or
    plain text with one prompt per line. Cycled (shuffled with `seed`) up to n."""
    items = []
    for line in pathlib.Path(path).read_text().splitlines():
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            o = json.loads(line)
            text = o.get("prompt") or o.get("text")
            ol = int(o.get("max_tokens", o.get("output_len", output_len)))
        else:
            text, ol = line, output_len
        il = len(tok.encode(text)) if tok else len(text.split())
        items.append(Prompt(text=text, input_len=il, output_len=ol))
    if not items:
        raise ValueError(f"{path}: no prompts")
    rng = random.Random(seed)
    rng.shuffle(items)
    return [dataclasses.replace(items[i % len(items)]) for i in range(n)]


def mixed(parts, seed=0):
    """Interleaves several prompt lists (e.g. long and short prompts) in a random order."""
    out = [p for part in parts for p in part]
    random.Random(seed).shuffle(out)
    return out
