#!/usr/bin/env python3
"""Generates Sources/SearchEngine/LanguageTables/*.swift: plural groups and stop words for the local
search engine's `ignorePlurals` and `removeStopWords` (en, fr, de, es). Nothing is fetched at run time:
the tables are compiled into the engine.

Sources (Debian packages; install them, then run this script from the repository root):
  plurals en  hunspell-en-us (SCOWL, permissive licence) flag S on nouns of wordnet-base (WordNet 3.0
              licence, permissive), plus WordNet's irregular plurals (noun.exc)
  plurals fr  hunspell-fr (Dicollecte, MPL-2.0): forms of nouns and adjectives tagged is:sg / is:pl,
              grouped per gender
  plurals es  hunspell-es (GPL-3+ or LGPL-3+ or MPL-1.1+; used under MPL-1.1): the plural flag S
  plurals de  none: the packaged German dictionaries are GPL, so German plurals are the engine's own
              rules (Sources/SearchEngine/GermanPlurals.swift); only the stop words are generated
  stop words  PostgreSQL's tsearch_data/{english,french,german,spanish}.stop (Snowball lists, BSD)
The generated files say which licence their data came under (see NOTICE.md beside this script).

Forms are normalized exactly like the engine's Normalizer (lowercase, diacritics folded, ß→ss, æ→ae,
œ→oe); forms with other characters than letters are skipped. Each table line is
`form<TAB>other other …`, sorted by form (bytes), one line for every form of every group, where each
other form is written as one character giving how many trailing characters of `form` to drop
('0'–'9', then 'a'… for 10+) followed by what to append.
"""
from __future__ import annotations

import re
import sys
import unicodedata
from collections import defaultdict
from pathlib import Path

HUN = Path("/usr/share/hunspell")
WN = Path("/usr/share/wordnet")
PG = Path("/usr/share/postgresql")
OUT = Path("Sources/SearchEngine/LanguageTables")

FOLD = {}
for lo, hi, v in [
    (0xC0, 0xC5, "a"), (0xC6, 0xC6, "ae"), (0xC7, 0xC7, "c"), (0xC8, 0xCB, "e"), (0xCC, 0xCF, "i"),
    (0xD0, 0xD0, "d"), (0xD1, 0xD1, "n"), (0xD2, 0xD6, "o"), (0xD8, 0xD8, "o"), (0xD9, 0xDC, "u"),
    (0xDD, 0xDD, "y"), (0xDE, 0xDE, "th"), (0xDF, 0xDF, "ss"), (0xE0, 0xE5, "a"), (0xE6, 0xE6, "ae"),
    (0xE7, 0xE7, "c"), (0xE8, 0xEB, "e"), (0xEC, 0xEF, "i"), (0xF0, 0xF0, "d"), (0xF1, 0xF1, "n"),
    (0xF2, 0xF6, "o"), (0xF8, 0xF8, "o"), (0xF9, 0xFC, "u"), (0xFD, 0xFD, "y"), (0xFE, 0xFE, "th"),
    (0xFF, 0xFF, "y"), (0x100, 0x105, "a"), (0x106, 0x10D, "c"), (0x10E, 0x111, "d"), (0x112, 0x11B, "e"),
    (0x11C, 0x123, "g"), (0x124, 0x127, "h"), (0x128, 0x131, "i"), (0x132, 0x133, "ij"), (0x134, 0x135, "j"),
    (0x136, 0x138, "k"), (0x139, 0x142, "l"), (0x143, 0x14B, "n"), (0x14C, 0x151, "o"), (0x152, 0x153, "oe"),
    (0x154, 0x159, "r"), (0x15A, 0x161, "s"), (0x162, 0x167, "t"), (0x168, 0x173, "u"), (0x174, 0x175, "w"),
    (0x176, 0x178, "y"), (0x179, 0x17E, "z"), (0x17F, 0x17F, "s"),
]:
    for c in range(lo, hi + 1):
        FOLD[c] = v


def norm(word: str) -> str | None:
    """The engine's normalized form of a one-token word, or None when it is not a single token."""
    out = []
    for ch in word:
        c = ord(ch)
        if c < 0x80:
            if ch.isalnum():
                out.append(ch.lower())
            else:
                return None
        elif 0x300 <= c <= 0x36F:
            continue
        elif c in FOLD:
            out.append(FOLD[c])
        elif ch.isalpha():
            for part in unicodedata.normalize("NFD", ch):
                if unicodedata.category(part) in ("Mn", "Me", "Mc"):
                    continue
                out.append(part.lower())
        else:
            return None
    s = "".join(out)
    return s if s and s.isalpha() else None


class Affixes:
    """The suffix rules of a hunspell .aff file (prefixes are not needed for plurals)."""

    def __init__(self, path: Path):
        self.flag_mode = "short"
        self.needaffix = None
        self.sfx: dict[str, list[tuple[str, str, list[str], re.Pattern, list[str]]]] = defaultdict(list)
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "FLAG" and len(parts) > 1:
                self.flag_mode = parts[1]
            elif parts[0] == "NEEDAFFIX" and len(parts) > 1:
                self.needaffix = parts[1]
            elif parts[0] == "SFX" and len(parts) >= 5 and parts[2] not in ("Y", "N"):
                flag, strip, add, cond = parts[1], parts[2], parts[3], parts[4]
                morph = parts[5:]
                cont: list[str] = []
                if "/" in add:
                    add, c = add.split("/", 1)
                    cont = self.flags(c)
                strip = "" if strip == "0" else strip
                add = "" if add == "0" else add
                pattern = re.compile("(?:" + (cond if cond != "." else "") + ")$")
                self.sfx[flag].append((strip, add, cont, pattern, morph))

    def flags(self, text: str) -> list[str]:
        if self.flag_mode == "long":
            return [text[i : i + 2] for i in range(0, len(text) - 1, 2)]
        if self.flag_mode == "num":
            return text.split(",")
        return list(text)

    def apply(self, word: str, flag: str):
        for strip, add, cont, pattern, morph in self.sfx.get(flag, []):
            if pattern.search(word) and (not strip or word.endswith(strip)):
                yield word[: len(word) - len(strip)] + add, cont, morph


def read_dic(path: Path, aff: Affixes):
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[1:]
    for line in lines:
        if not line or line.startswith("\t"):
            continue
        head, _, morph = line.partition("\t") if "\t" in line else line.partition(" ")
        word, _, flags = head.partition("/")
        yield word, aff.flags(flags) if flags else [], morph.split()


def english() -> list[list[str]]:
    aff = Affixes(HUN / "en_US.aff")
    nouns = set()
    for line in (WN / "index.noun").read_text(encoding="utf-8").splitlines():
        if line.startswith(" "):
            continue
        lemma = line.split(" ", 1)[0]
        if "_" not in lemma:
            nouns.add(lemma)
    groups: dict[str, set[str]] = defaultdict(set)
    for word, flags, _ in read_dic(HUN / "en_US.dic", aff):
        if "S" not in flags or word.lower() != word or word not in nouns:
            continue
        for form, _, _ in aff.apply(word, "S"):
            groups[word].add(form)
    for line in (WN / "noun.exc").read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) >= 2 and "_" not in line:
            for singular in parts[1:]:
                groups[singular].add(parts[0])
    return [[s, *sorted(p)] for s, p in groups.items()]


def french() -> list[list[str]]:
    aff = Affixes(HUN / "fr.aff")
    groups = []
    for word, flags, morph in read_dic(HUN / "fr.dic", aff):
        if not any(m in ("po:nom", "po:adj") for m in morph):
            continue
        base_gender = "mas" if "is:mas" in morph else "fem" if "is:fem" in morph else "epi"
        by_gender: dict[str, set[str]] = defaultdict(set)
        if aff.needaffix not in flags and ("is:sg" in morph or "is:pl" in morph):
            by_gender[base_gender].add(word)
        for flag in flags:
            for form, _, rule_morph in aff.apply(word, flag):
                tags = set(rule_morph)
                if "is:sg" not in tags and "is:pl" not in tags:
                    continue
                gender = "mas" if "is:mas" in tags else "fem" if "is:fem" in tags else base_gender
                by_gender[gender].add(form)
        # Epicene forms (no gender tag) belong to both genders' groups.
        epi = by_gender.pop("epi", set())
        if not by_gender and epi:
            by_gender["epi"] = epi
        for forms in by_gender.values():
            forms |= epi
            if len(forms) > 1:
                groups.append(sorted(forms))
    return groups


def spanish() -> list[list[str]]:
    aff = Affixes(HUN / "es_ES.aff")
    groups = []
    for word, flags, _ in read_dic(HUN / "es_ES.dic", aff):
        if word[:1].isupper():
            continue
        if "S" in flags:
            groups.append([word, *[f for f, _, _ in aff.apply(word, "S")]])
        for flag in flags:
            if flag == "S":
                continue
            for form, cont, _ in aff.apply(word, flag):
                if "S" in cont:
                    groups.append([form, *[f for f, _, _ in aff.apply(form, "S")]])
    return groups



def encode(key: str, other: str) -> str:
    common = 0
    while common < min(len(key), len(other)) and key[common] == other[common]:
        common += 1
    drop = len(key) - common
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    if drop >= len(digits):
        drop, common = len(key), 0
    return digits[drop] + other[common:]


def table(groups: list[list[str]]) -> str:
    others: dict[str, set[str]] = defaultdict(set)
    for group in groups:
        normalized = {n for n in (norm(w) for w in group) if n}
        if len(normalized) < 2:
            continue
        for form in normalized:
            others[form] |= normalized - {form}
    lines = []
    for form in sorted(others, key=lambda s: s.encode()):
        lines.append(form + "\t" + " ".join(encode(form, o) for o in sorted(others[form])))
    return "\n".join(lines) + "\n"


def stopwords(name: str) -> str:
    files = sorted(PG.glob(f"*/tsearch_data/{name}.stop"))
    if not files:
        sys.exit(f"missing PostgreSQL stop words for {name} (install postgresql)")
    words = sorted({n for n in (norm(w.strip()) for w in files[-1].read_text(encoding="utf-8").split()) if n})
    return " ".join(words)


def swift_file(lang: str, source: str, licence: str, plurals: str, stops: str) -> str:
    assert '"""' not in plurals and "\\" not in plurals
    return (
        "// Generated by scripts/language-tables/generate.py; do not edit.\n"
        f"// Plurals: {source}. Licence of that data: {licence}.\n"
        "// Stop words: PostgreSQL tsearch_data (Snowball project lists, BSD licence).\n"
        "// swift-format-ignore-file\n\n"
        "// Read by LanguageTables (Languages.swift).\n"
        f"let plurals_{lang}: StaticString = \"\"\"\n"
        + plurals
        + "\"\"\"\n\n"
        f"let stopWords_{lang}: StaticString = \"{stops}\"\n"
    )


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    specs = [
        ("en", english, "hunspell-en-us (SCOWL) + WordNet 3.0 nouns and noun.exc", "SCOWL and WordNet licences (permissive)", "english"),
        ("fr", french, "hunspell-fr (Dicollecte)", "MPL-2.0", "french"),
        ("es", spanish, "hunspell-es (Santiago Bosio)", "MPL-1.1 (tri-licensed GPL-3+/LGPL-3+/MPL-1.1+)", "spanish"),
    ]
    for lang, fn, source, licence, stop in specs:
        t = table(fn())
        path = OUT / f"Plurals_{lang}.swift"
        path.write_text(swift_file(lang, source, licence, t, stopwords(stop)), encoding="utf-8")
        print(f"{lang}: {t.count(chr(10))} forms, {len(t.encode())} bytes -> {path}")
    path = OUT / "StopWords_de.swift"
    path.write_text(
        "// Generated by scripts/language-tables/generate.py; do not edit.\n"
        "// Stop words: PostgreSQL tsearch_data (Snowball project lists, BSD licence). German plurals are rules\n"
        "// (GermanPlurals.swift), not a table.\n"
        "// swift-format-ignore-file\n\n"
        "// Read by LanguageTables (Languages.swift).\n"
        f"let stopWords_de: StaticString = \"{stopwords('german')}\"\n",
        encoding="utf-8",
    )
    print(f"de: stop words only -> {path}")


if __name__ == "__main__":
    main()
