"""The C tokenizer (driven through `sparsed tokenize`) against the canonical Hugging Face
`tokenizers` library, on the bundled model's tokenizer and the real Llama-3 and Qwen3 ones:
encoding (with and without special tokens) of a generated corpus, decoding of random id
sequences (skip_special both ways) and streaming decoding."""

import json
import os
import random
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("SD_SHARED_DIR", ROOT.parent / "shared"))
TOKENIZERS = {
    "tiny": ROOT / "models" / "tiny",
    "llama3": SHARED / "tokenizers" / "llama3",
    "qwen3": SHARED / "tokenizers" / "qwen3",
}
SEED = 20240607


def sparsed_bin():
    """The binary under test: $SPARSED, else $SD_BUILD/sparsed (default build/)."""
    p = os.environ.get("SPARSED") or str(ROOT / os.environ.get("SD_BUILD", "build") / "sparsed")
    if not os.access(p, os.X_OK):
        pytest.skip(f"{p} is not built (run make, or set SPARSED=path/to/sparsed)")
    return p


def tok_dir(name):
    d = TOKENIZERS[name]
    if not (d / "tokenizer.json").exists():
        pytest.skip(f"{d}/tokenizer.json absent (the shared assets live in ../shared beside the repo)")
    return d


def run_lines(name, args, items):
    """Sends one JSON line per item to `sparsed tokenize`, returns the parsed output lines."""
    return run_lines_path(tok_dir(name), args, items)


def run_lines_path(path, args, items):
    inp = "".join(json.dumps(x) + "\n" for x in items)
    res = subprocess.run(
        [sparsed_bin(), "tokenize", "--tokenizer", str(path)] + args,
        input=inp.encode(),
        capture_output=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr.decode(errors="replace")[-2000:]
    # split on "\n" only: decoded strings may hold U+2028, U+0085 ... which splitlines() breaks on
    out = [json.loads(line) for line in res.stdout.decode().split("\n")[:-1]]
    assert len(out) == len(items)
    return out


# ---- the corpus (fixed seed) ----

WORDS = ["the", "The", "don't", "I'M", "you'll", "we've", "it's", "hello", "world", "naïve", "café",
         "HTTP", "json", "x", "Ω", "über", "straße", "déjà", "vu", "ĳ", "ﬁ", "№", "²", "½", "Ⅻ"]
EMOJI = ["😀", "👍", "👍🏽", "👍🏿", "👨‍👩‍👧‍👦", "🧑🏽‍💻", "🏳️‍🌈", "🇺🇸", "🇯🇵", "1️⃣", "❤️", "🫠",
         "👩🏻‍❤️‍💋‍👨🏼", "🐍", "🤷‍♀️", "©", "™"]
COMBINING = ["e\u0301", "a\u0308", "o\u0302\u0301", "n\u0303", "A\u030a", "u\u031b\u0323", "\u1100\u1161\u11a8",
             "\u0915\u094d\u0937", "i\u0307", "e\u0301\u0301", "\u0301", "Å", "Å", "ﬀ", "K"]
WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\t\t", "\u00a0", "\u3000", "\u2003",
              "\u0085", "\u2028", "\u180e", "\x0b", "\x0c", "    "]


def stdlib_snippets(rng, n):
    libdir = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in libdir.glob("*.py"))[:400]
    out = []
    while len(out) < n and files:
        f = rng.choice(files)
        try:
            lines = f.read_text(encoding="utf-8").splitlines(keepends=True)
        except (UnicodeDecodeError, OSError):
            continue
        if not lines:
            continue
        i = rng.randrange(len(lines))
        out.append("".join(lines[i : i + rng.randint(1, 30)]))
    return out


def rand_unicode(rng, n):
    s = []
    for _ in range(n):
        r = rng.random()
        if r < 0.3:
            cp = rng.randint(0x20, 0x7E)
        elif r < 0.6:
            cp = rng.randint(0xA0, 0x2FFF)
        elif r < 0.8:
            cp = rng.randint(0x3000, 0xFFFD)
        else:
            cp = rng.randint(0x10000, 0x10FFFF)
        if 0xD800 <= cp <= 0xDFFF:
            cp = 0xFFFD
        s.append(chr(cp))
    return "".join(s)


def rand_cjk(rng, n):
    ranges = [(0x4E00, 0x9FFF), (0x3040, 0x30FF), (0xAC00, 0xD7A3), (0x3400, 0x4DBF), (0xFF00, 0xFFEF)]
    return "".join(chr(rng.randint(*rng.choice(ranges))) for _ in range(n))


def rand_number(rng):
    k = rng.random()
    if k < 0.3:
        return str(rng.randint(0, 10 ** rng.randint(1, 25)))
    if k < 0.5:
        return f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f}"
    if k < 0.7:
        return f"{rng.randint(0, 10**9):,}"
    if k < 0.85:
        return "".join(rng.choice("0123456789٠١٢٣٤٥६७८९") for _ in range(rng.randint(1, 12)))
    return f"{rng.random():e}"


def mixed(rng, specials, n_parts):
    parts = []
    for _ in range(n_parts):
        k = rng.randrange(8)
        if k == 0:
            parts.append(rng.choice(WORDS))
        elif k == 1:
            parts.append(rng.choice(EMOJI))
        elif k == 2:
            parts.append(rng.choice(COMBINING))
        elif k == 3:
            parts.append(rng.choice(WHITESPACE))
        elif k == 4:
            parts.append(rand_number(rng))
        elif k == 5:
            parts.append(rand_cjk(rng, rng.randint(1, 6)))
        elif k == 6 and specials:
            sp = rng.choice(specials)
            parts.append(rng.choice([sp, sp, sp[:-1], " " + sp + " ", sp + sp]))
        else:
            parts.append(rng.choice(["'s", "'T", "'re", "'LL", "...", "!!", "->", "==", "#", "//", "\\n", "'"]))
    return "".join(parts)


def corpus(specials):
    """Texts (str) and raw byte strings (bytes), generated with a fixed seed."""
    rng = random.Random(SEED)
    texts = stdlib_snippets(rng, 600)
    texts += ["".join(rng.choice(WHITESPACE + ["a", "b", "x=1", "\n"]) for _ in range(rng.randint(1, 40)))
              for _ in range(300)]
    texts += [" ".join(rand_number(rng) for _ in range(rng.randint(1, 8))) for _ in range(300)]
    texts += ["".join(rng.choice(EMOJI + [" ", "a"]) for _ in range(rng.randint(1, 12))) for _ in range(250)]
    texts += [rand_cjk(rng, rng.randint(1, 40)) for _ in range(200)]
    texts += ["".join(rng.choice(COMBINING + WORDS + [" "]) for _ in range(rng.randint(1, 15)))
              for _ in range(300)]
    texts += [mixed(rng, specials, rng.randint(1, 25)) for _ in range(900)]
    texts += [rand_unicode(rng, rng.randint(1, 40)) for _ in range(400)]
    texts += ["", " ", "\n", "  \n\n  ", " " * 300, "\n" * 50, "a" * 1000, "9" * 100, "🙂" * 40,
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"]
    blobs = [bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    blobs += [s.encode()[: rng.randint(0, len(s.encode()))] + bytes([rng.choice([0x80, 0xC3, 0xE2, 0xF0, 0xFF])])
              for s in texts[-1300:-1000]]
    blobs += [b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf0\x9f\x98", b"a\xf0\x9fb"]
    return texts, blobs


def hf(name):
    return tokenizers.Tokenizer.from_file(str(tok_dir(name) / "tokenizer.json"))


def specials_of(tok):
    return [t.content for t in tok.get_added_tokens_decoder().values()]


def first_mismatch(inputs, got, want):
    for x, g, w in zip(inputs, got, want):
        if g != w:
            return f"input {x!r}:\n  sparsed:    {g}\n  tokenizers: {w}"
    return None


@pytest.mark.parametrize("name", list(TOKENIZERS))
@pytest.mark.parametrize("add_special", [True, False])
def test_encode_matches_tokenizers(name, add_special):
    tok = hf(name)
    texts, blobs = corpus(specials_of(tok))
    assert len(texts) + len(blobs) >= 3000
    items = texts + [{"hex": b.hex()} for b in blobs]
    args = [] if add_special else ["--no-special"]
    got = run_lines(name, args, items)
    decoded = texts + [b.decode("utf-8", errors="replace") for b in blobs]
    want = [e.ids for e in tok.encode_batch(decoded, add_special_tokens=add_special)]
    bad = sum(g != w for g, w in zip(got, want))
    assert bad == 0, f"{bad}/{len(items)} encodings differ; first: {first_mismatch(items, got, want)}"


def random_id_seqs(tok, n):
    rng = random.Random(SEED + 1)
    size = tok.get_vocab_size(with_added_tokens=True)
    specials = list(tok.get_added_tokens_decoder())
    seqs = []
    for _ in range(n):
        seq = []
        for _ in range(rng.randint(0, 30)):
            r = rng.random()
            if r < 0.15 and specials:
                seq.append(rng.choice(specials))
            elif r < 0.5:
                seq.append(rng.randrange(min(size, 512)))  # byte tokens: split UTF-8 characters
            else:
                seq.append(rng.randrange(size))
        seqs.append(seq)
    return seqs


@pytest.mark.parametrize("name", list(TOKENIZERS))
@pytest.mark.parametrize("skip", [True, False])
def test_decode_matches_tokenizers(name, skip):
    tok = hf(name)
    seqs = random_id_seqs(tok, 1500)
    texts, _ = corpus(specials_of(tok))
    seqs += [e.ids for e in tok.encode_batch(texts[::3])]  # real encodings round-trip
    args = ["--decode"] + (["--no-special"] if skip else [])
    got = run_lines(name, args, seqs)
    want = tok.decode_batch(seqs, skip_special_tokens=skip)
    bad = sum(g != w for g, w in zip(got, want))
    assert bad == 0, f"{bad}/{len(seqs)} decodings differ; first: {first_mismatch(seqs, got, want)}"


@pytest.mark.parametrize("name", list(TOKENIZERS))
@pytest.mark.parametrize("skip", [True, False])
def test_stream_decode_equals_full_decode(name, skip):
    tok = hf(name)
    seqs = random_id_seqs(tok, 800)
    args = ["--decode", "--stream"] + (["--no-special"] if skip else [])
    got = run_lines(name, args, seqs)
    want = tok.decode_batch(seqs, skip_special_tokens=skip)
    for seq, pieces, w in zip(seqs, got, want):
        assert isinstance(pieces, list), f"{seq}: {pieces}"
        # (a piece that split a UTF-8 character would be an {"error"} line: jansson refuses it)
        assert "".join(pieces) == w, f"ids {seq}: pieces {pieces!r} != {w!r}"


def test_added_token_flags_match_tokenizers(tmp_path):
    """Added tokens with lstrip / rstrip / single_word / normalized, behind an NFKC normaliser
    and a Split pre-tokenizer, on a variant of the bundled tokenizer.json."""
    base = json.loads((tok_dir("tiny") / "tokenizer.json").read_text(encoding="utf-8"))
    extra = [("<mask>", dict(lstrip=True)), ("[END]", dict(rstrip=True)), ("cat", dict(single_word=True)),
             ("ﬁsh", dict(normalized=True)), ("<both>", dict(lstrip=True, rstrip=True)), ("ab", {}),
             ("abc", dict(special=False))]
    next_id = 1 + max(base["model"]["vocab"].values())
    for i, (content, flags) in enumerate(extra):
        tok = dict(id=next_id + i, content=content, single_word=False, lstrip=False, rstrip=False,
                   normalized=False, special=True)
        tok.update(flags)
        base["added_tokens"].append(tok)
    base["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}]}
    base["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}+"}, "behavior": "MergedWithPrevious", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(base), encoding="utf-8")
    tok = tokenizers.Tokenizer.from_file(str(path))
    rng = random.Random(SEED + 2)
    pieces = [c for c, _ in extra] + ["fish", "ﬁ", "sh", " ", "  ", "\t", "\n", "x", "dog", "é", "1", "22", "①"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(1500)]
    for args, special in (([], True), (["--no-special"], False)):
        got = run_lines_path(path, args, texts)
        want = [e.ids for e in tok.encode_batch(texts, add_special_tokens=special)]
        bad = sum(g != w for g, w in zip(got, want))
        assert bad == 0, f"{bad}/{len(texts)} differ; first: {first_mismatch(texts, got, want)}"
    got = run_lines_path(path, ["--decode", "--no-special"], want)
    assert got == tok.decode_batch(want, skip_special_tokens=True)


def test_help_lists_options():
    res = subprocess.run([sparsed_bin(), "tokenize", "--help"], capture_output=True, timeout=30)
    assert res.returncode == 0
    for opt in ("--tokenizer", "--no-special", "--decode", "--stream"):
        assert opt in res.stdout.decode()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
