#!/usr/bin/python3
"""Build qattn's English training corpus from Debian packages.

Runs on a plain Debian 12 box with /usr/bin/python3 (standard library only),
apt-get and dpkg-deb.  Steps:

  1. `apt-get download PKG=VERSION` for every package in SOURCES (pinned to the
     versions the shipped models were trained on; if that exact version is no
     longer in the archive, the current candidate is taken and the manifest
     says so), into data/corpus/raw/debs/ (git-ignored).
  2. `dpkg-deb -x` each into data/corpus/raw/x/PKG/ (git-ignored).
  3. Extract English text with a per-format extractor (dictd dictionaries,
     WordNet database, SWORD zText bible, fortune files, reStructuredText,
     POD, roff man pages, HTML, plain text), normalise it, split it into
     paragraphs and drop exact duplicate paragraphs of 48 characters or more
     (whitespace- and case-insensitive) across the whole corpus.
  4. Cut each document into chunks of at most CHUNK_BYTES at paragraph
     boundaries; every 50th chunk (global index % 50 == 17) is held out (2%).
  5. Write data/scratch/corpus/train.txt and heldout.txt (chunks separated by a
     line holding only the ASCII record separator \\x1e) and
     data/corpus/MANIFEST.tsv (package, version, license, files, bytes) plus
     data/corpus/SHA256SUMS.

Usage: /usr/bin/python3 data/build_corpus.py [--no-download]
"""
import argparse
import glob
import gzip
import hashlib
import html
import html.parser
import os
import re
import struct
import subprocess
import sys
import unicodedata
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
RAW = os.path.join(HERE, "corpus", "raw")
OUTDIR = os.path.join(HERE, "scratch", "corpus")
MANIFEST = os.path.join(HERE, "corpus", "MANIFEST.tsv")
SUMS = os.path.join(HERE, "corpus", "SHA256SUMS")
CHUNK_BYTES = 20000
HOLDOUT_EVERY = 50
HOLDOUT_PHASE = 17
SEP = "\n\x1e\n"

# package, pinned version, license (from the package's copyright file),
# extractor, glob patterns relative to the extracted package root.
SOURCES = [
    ("dict-gcide", "0.48.5+nmu2", "GPL-2+ (GCIDE; based on Webster 1913, public domain)",
     "gcide", ["usr/share/dictd/gcide.dict.dz"]),
    ("wordnet-base", "1:3.0-37", "WordNet 3.0 license (BSD-like)",
     "wordnet", ["usr/share/wordnet/data.noun", "usr/share/wordnet/data.verb",
                 "usr/share/wordnet/data.adj", "usr/share/wordnet/data.adv"]),
    ("sword-text-kjv", "14.3-1", "public domain (KJV text); packaging GPL-2+",
     "sword", ["usr/share/sword/modules/texts/ztext/engKJV2006eb/ot.bzz",
               "usr/share/sword/modules/texts/ztext/engKJV2006eb/nt.bzz"]),
    ("fortunes", "1:1.99.1-7.3", "BSD-style (fortune-mod data files; see the package copyright)",
     "fortune", ["usr/share/games/fortunes/*"]),
    ("jargon-text", "4.4.7-4.1", "public domain (Jargon File 4.4.7)",
     "plain", ["usr/share/doc/jargon-text/jargon.txt.gz"]),
    ("dict-devil", "1.0-13.1", "public domain (Bierce, The Devil's Dictionary)",
     "dictd", ["usr/share/dictd/devil.dict.dz"]),
    ("dict-foldoc", "20230119-1", "GFDL-1.1+ (FOLDOC)",
     "dictd", ["usr/share/dictd/foldoc.dict.dz"]),
    ("linux-doc-6.1", "6.1.192-2", "GPL-2 (Linux kernel documentation)",
     "rst", ["usr/share/doc/linux-doc-6.1/html/_sources/**/*.rst.txt"]),
    ("python3.11-doc", "3.11.2-6+deb12u9", "PSF-2.0 (Python documentation)",
     "rst", ["usr/share/doc/python3.11/html/_sources/**/*.rst.txt"]),
    ("perl-doc", "5.36.0-7+deb12u4", "GPL-1+ or Artistic (Perl documentation)",
     "pod", ["usr/share/perl/5.36.0/pod/*.pod"]),
    ("manpages", "6.03-2", "Linux-man-pages-copyleft / GPL-2+ (per page)",
     "roff", ["usr/share/man/man*/*.gz"]),
    ("manpages-dev", "6.03-2", "Linux-man-pages-copyleft / GPL-2+ (per page)",
     "roff", ["usr/share/man/man*/*.gz"]),
    ("debian-policy", "4.6.2.0", "GPL-2+ (Debian Policy Manual)",
     "rst", ["usr/share/doc/debian-policy/policy.html/_sources/*.rst.txt",
             "usr/share/doc/debian-policy/*.txt.gz"]),
    ("developers-reference", "12.18", "GPL-2 (Debian Developer's Reference)",
     "rst", ["usr/share/developers-reference/_sources/*.rst.txt"]),
    ("debian-reference-en", "2.100", "GPL-2+ (Debian Reference)",
     "html", ["usr/share/debian-reference/*.en.html"]),
    ("maint-guide", "1.2.53", "GPL-2+ / MIT (Debian New Maintainers' Guide)",
     "html", ["usr/share/doc/maint-guide/html/*.en.html"]),
    ("debian-faq", "11.1", "verbatim copying permitted (Debian FAQ, SPI)",
     "html", ["usr/share/doc/debian/FAQ/*.en.html"]),
    ("debian-handbook", "11.20220922", "GPL-2+ or CC-BY-SA-3.0 (The Debian Administrator's Handbook)",
     "html", ["usr/share/doc/debian-handbook/html/en-US/*.html"]),
    ("gnu-standards", "2022.03.23-0.1", "GFDL-1.3+ (GNU Coding Standards, Information for Maintainers)",
     "plain", ["usr/share/doc/gnu-standards/*.text.gz"]),
    ("bash-doc", "5.2.15-2", "GFDL-NIV-1.3 (Bash Reference Manual)",
     "html", ["usr/share/doc/bash/bashref.html"]),
    ("git-doc", "1:2.39.5-0+deb12u3", "GPL-2 (Git documentation)",
     "plain", ["usr/share/doc/git-doc/*.txt", "usr/share/doc/git-doc/RelNotes/*.txt",
               "usr/share/doc/git-doc/howto/*.txt", "usr/share/doc/git-doc/technical/*.txt"]),
    ("postgresql-doc-15", "15.20-0+deb12u1", "PostgreSQL license (BSD-like)",
     "html", ["usr/share/doc/postgresql-doc-15/html/*.html"]),
]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, universal_newlines=True, **kw).stdout


def pkgdir(pkg):
    return os.path.join(RAW, "x", pkg)


def fetch(pkg, version):
    """Download and unpack one package; return (version used, deb path, note)."""
    debs = os.path.join(RAW, "debs")
    os.makedirs(debs, exist_ok=True)
    note = ""

    def find():
        # apt-get download escapes ':' in the epoch as %3a
        hits = sorted(glob.glob(os.path.join(debs, pkg + "_*.deb")))
        return hits

    hits = find()
    if not hits:
        try:
            subprocess.run(["apt-get", "download", "-q", pkg + "=" + version], cwd=debs, check=True)
        except subprocess.CalledProcessError:
            note = "pinned version %s unavailable; took candidate" % version
            subprocess.run(["apt-get", "download", "-q", pkg], cwd=debs, check=True)
        hits = find()
    deb = hits[-1]
    used = run(["dpkg-deb", "-f", deb, "Version"]).strip()
    if used != version and not note:
        note = "pinned %s, found %s" % (version, used)
    dest = pkgdir(pkg)
    if not os.path.isdir(dest):
        os.makedirs(dest)
        subprocess.run(["dpkg-deb", "-x", deb, dest], check=True)
    return used, deb, note


def read_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz") or path.endswith(".dz"):
        data = gzip.decompress(data)  # dictzip is gzip-compatible
    return data


def read_text(path):
    return read_bytes(path).decode("utf-8", errors="replace")


# ---------------------------------------------------------------- extractors
# Each yields documents: (name, text).  Normalisation happens afterwards.

def ex_dictd_entries(text):
    """Split a dictd .dict body into entries (entries start at column 0)."""
    entries, cur = [], []
    for line in text.split("\n"):
        if line and not line[0].isspace() and cur and cur[-1] == "":
            entries.append("\n".join(cur))
            cur = []
        cur.append(line)
    if cur:
        entries.append("\n".join(cur))
    return entries


GCIDE_SRC = re.compile(r"^\s*\[[A-Za-z0-9 .,&'/-]*(Webster|PJC|WordNet|Century|Dict|Sup\.|Chambers|RHD|Brown|Locke|Bouvier|Johnson|Source)[A-Za-z0-9 .,&'/-]*\]\s*$")


def ex_gcide(path):
    text = read_text(path)
    # dictd database header entries (00-database-*) are not dictionary text
    out = []
    for e in ex_dictd_entries(text):
        if e.startswith("00-database") or e.startswith("00database"):
            continue
        lines = [l for l in e.split("\n") if not GCIDE_SRC.match(l)]
        e = "\n".join(lines)
        e = re.sub(r"\\[^\\\n]{1,60}\\", "", e)   # pronunciation \Af*fect"\
        e = re.sub(r"\{([^{}\n]*)\}", r"\1", e)   # cross references {Word}
        out.append(e)
    yield os.path.basename(path), "\n".join(out)


def ex_dictd(path):
    text = read_text(path)
    out = []
    for e in ex_dictd_entries(text):
        if e.startswith("00-database") or e.startswith("00database"):
            continue
        out.append(re.sub(r"\{([^{}\n]*)\}", r"\1", e))
    yield os.path.basename(path), "\n".join(out)


def ex_wordnet(path):
    pos = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}[path.rsplit(".", 1)[1]]
    out = []
    for line in read_text(path).split("\n"):
        if not line or line.startswith("  ") or "|" not in line:
            continue
        head, gloss = line.split("|", 1)
        f = head.split()
        n = int(f[3], 16)
        words = [f[4 + 2 * i].replace("_", " ") for i in range(n)]
        words = [re.sub(r"\([a-z]+\)$", "", w) for w in words]
        out.append("%s (%s): %s" % (", ".join(words), pos, gloss.strip()))
    # one line per synset; group 40 synsets per paragraph so chunks hold prose
    paras = ["\n".join(out[i:i + 40]) for i in range(0, len(out), 40)]
    yield os.path.basename(path), "\n\n".join(paras)


def ex_sword(path):
    """SWORD zText module: .bzs holds (offset, size, usize) per zlib block of .bzz."""
    bzs = read_bytes(path[:-1] + "s")
    bzz = read_bytes(path)
    parts = []
    for i in range(len(bzs) // 12):
        off, size, usize = struct.unpack("<III", bzs[12 * i:12 * i + 12])
        t = zlib.decompress(bzz[off:off + size]).decode("utf-8", errors="replace")
        t = re.sub(r"<note\b.*?</note>", "", t, flags=re.S)  # translators' footnotes
        t = re.sub(r"<title[^>]*>(.*?)</title>", r"\n\n\1\n\n", t)
        t = re.sub(r'<chapter [^>]*osisID="([A-Za-z0-9]+)\.(\d+)"[^>]*/>', r"\n\n\1 \2\n", t)
        t = re.sub(r'<div [^>]*type="x-p"[^>]*/>', "\n\n", t)
        t = re.sub(r"<[^>]+>", "", t)
        t = html.unescape(t)
        t = re.sub(r"[ \t]+", " ", t)
        parts.append(t)
    yield os.path.basename(path), "\n\n".join(parts)


def ex_fortune(path):
    base = os.path.basename(path)
    if "." in base or os.path.islink(path) or not os.path.isfile(path):
        return  # .dat index files, .u8 symlinks
    text = read_text(path)
    items = re.split(r"\n%\n", "\n" + text + "\n")
    yield base, "\n\n".join(i.strip("\n") for i in items if i.strip())


def ex_plain(path):
    yield os.path.basename(path), read_text(path)


RST_DIRECTIVE = re.compile(r"^\s*\.\. [a-zA-Z:_-]+::.*$")


def ex_rst(path):
    text = read_text(path)
    lines = []
    for l in text.split("\n"):
        if RST_DIRECTIVE.match(l) and not re.match(r"^\s*\.\. (note|warning|tip|important|attention|caution|hint|seealso|versionadded|versionchanged|deprecated)::", l):
            continue
        if re.match(r"^\s*\.\. (_[^:]+:|\|[^|]+\|)", l):  # link targets, substitutions
            continue
        if re.match(r"^\s*:(orphan|tocdepth|maxdepth|glob|hidden|caption|numbered|titlesonly|linenos|noindex|toctree)\b", l):
            continue
        # inline roles :func:`name` -> name ; `text <url>`_ -> text
        l = re.sub(r":[a-zA-Z:_-]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", l)
        l = re.sub(r"`([^`<]+?)\s*<[^>]+>`__?", r"\1", l)
        l = re.sub(r"``([^`]+)``", r"\1", l)
        l = re.sub(r"`([^`]+)`_?_?", r"\1", l)
        lines.append(l)
    yield os.path.basename(path), "\n".join(lines)


def pod_inline(s):
    for _ in range(4):
        s2 = re.sub(r"[A-Z]<<+\s+(.*?)\s+>>+", r"\1", s)
        s2 = re.sub(r"L<([^<>|]*)\|[^<>]*>", r"\1", s2)
        s2 = re.sub(r"E<(lt|gt|verbar|sol)>", lambda m: {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}[m.group(1)], s2)
        s2 = re.sub(r"[A-Z]<([^<>]*)>", r"\1", s2)
        if s2 == s:
            break
        s = s2
    return s


def ex_pod(path):
    out = []
    skip = False
    for l in read_text(path).split("\n"):
        if l.startswith("=begin"):
            skip = True
            continue
        if l.startswith("=end"):
            skip = False
            continue
        if skip:
            continue
        if l.startswith("="):
            m = re.match(r"=(head\d|item)\s*(.*)", l)
            if m:
                out.append("")
                out.append(pod_inline(m.group(2)))
                out.append("")
            continue
        out.append(pod_inline(l))
    yield os.path.basename(path), "\n".join(out)


ROFF_ESC = [
    (r"\\f\[[A-Z]*\]|\\f\(..|\\f[A-Z1-4P]", ""),
    (r"\\\(em|\\\[em\]", "--"), (r"\\\(en|\\\[en\]", "-"),
    (r"\\\(aq|\\\[aq\]", "'"), (r"\\\(dq|\\\[dq\]", '"'),
    (r"\\\(lq|\\\(rq|\\\[lq\]|\\\[rq\]", '"'), (r"\\\(oq|\\\(cq", "'"),
    (r"\\\(bu|\\\[bu\]", "*"), (r"\\\(ti|\\\[ti\]|\\\(ap", "~"), (r"\\\(ha|\\\[ha\]", "^"),
    (r"\\\(co", "(c)"), (r"\\\(rg", "(R)"), (r"\\\(mu", "x"), (r"\\\(>=", ">="), (r"\\\(<=", "<="),
    (r"\\\(\*\*", "*"), (r"\\\(..", ""), (r"\\\[[^\]]*\]", ""),
    (r"\\-", "-"), (r"\\e", "\\\\"), (r"\\&|\\:|\\/|\\,|\\%|\\c", ""), (r"\\ ", " "), (r"\\~", " "),
    (r"\\s[+-]?\d", ""), (r"\\\*\[[^\]]*\]|\\\*\(..|\\\*.", ""), (r"\\[|^0]", ""), (r"\\\.", "."),
]
ROFF_ESC = [(re.compile(a), b) for a, b in ROFF_ESC]
ROFF_TEXT_MACROS = {"B", "I", "SM", "SB"}
ROFF_ALT_MACROS = {"BR", "RB", "BI", "IB", "IR", "RI"}
ROFF_BREAK_MACROS = {"PP", "P", "LP", "TP", "IP", "HP", "SH", "SS", "br", "sp", "in", "RS", "RE", "EX", "EE", "nf", "fi", "TQ", "ad", "na"}


def roff_args(s):
    return [a.replace('"', "") for a in re.findall(r'"[^"]*"|\S+', s)]


def ex_roff(path):
    text = read_text(path)
    if text.startswith(".so "):
        return  # a link to another page
    out = []
    for l in text.split("\n"):
        if l.startswith('.\\"') or l.startswith("'\\\"") or l.startswith('\\"'):
            continue
        if l.startswith(".") or l.startswith("'"):
            m = re.match(r"[.']\s*([A-Za-z]+)\s*(.*)", l)
            if not m:
                continue
            mac, rest = m.group(1), m.group(2)
            if mac in ("SH", "SS"):
                out += ["", " ".join(roff_args(rest)), ""]
            elif mac in ("IP",):
                a = roff_args(rest)
                out += ["", a[0] if a else ""]
            elif mac in ROFF_TEXT_MACROS:
                out.append(" ".join(roff_args(rest)))
            elif mac in ROFF_ALT_MACROS:
                out.append("".join(roff_args(rest)))
            elif mac in ROFF_BREAK_MACROS:
                if mac in ("PP", "P", "LP", "TP", "sp", "HP"):
                    out.append("")
            continue  # TH, de, ds, tbl (TS/TE) markers, etc.
        out.append(l)
    s = "\n".join(out)
    for rx, rep in ROFF_ESC:
        s = rx.sub(rep, s)
    s = s.replace("\\\\", "\\")
    yield os.path.basename(path), s


class HTMLText(html.parser.HTMLParser):
    BLOCK = {"p", "div", "br", "h1", "h2", "h3", "h4", "h5", "h6", "li", "dt", "dd", "tr",
             "pre", "table", "blockquote", "section", "ul", "ol", "dl", "title", "hr", "td", "th"}
    SKIP = {"script", "style", "head", "nav"}
    SKIP_CLASSES = {"navheader", "navfooter", "toc", "breadcrumb", "footer", "header",
                    "sphinxsidebar", "related", "docnav", "navigation", "NAVHEADER", "NAVFOOTER"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out = []
        self.skip_depth = 0
        self.stack = []  # per open tag: True if it started a skip

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        starts_skip = tag in self.SKIP or bool(classes & self.SKIP_CLASSES)
        if tag in ("br", "hr", "img", "meta", "link", "input", "col", "area", "base", "wbr"):
            if tag in ("br", "hr") and not self.skip_depth:
                self.out.append("\n")
            return
        self.stack.append((tag, starts_skip))
        if starts_skip:
            self.skip_depth += 1
        if tag in self.BLOCK and not self.skip_depth:
            self.out.append("\n\n" if tag in ("p", "h1", "h2", "h3", "h4", "pre", "table", "div", "dl", "ul", "ol") else "\n")

    def handle_endtag(self, tag):
        # pop to the matching tag (tolerates unclosed <p>, <li> ...)
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                for t, sk in self.stack[i:]:
                    if sk:
                        self.skip_depth -= 1
                del self.stack[i:]
                break
        if tag in self.BLOCK and not self.skip_depth:
            self.out.append("\n\n" if tag in ("p", "h1", "h2", "h3", "h4", "pre", "table") else "\n")

    def handle_data(self, data):
        if not self.skip_depth:
            self.out.append(data)


def ex_html(path):
    p = HTMLText()
    p.feed(read_text(path))
    p.close()
    yield os.path.basename(path), "".join(p.out)


EXTRACTORS = {
    "gcide": ex_gcide, "dictd": ex_dictd, "wordnet": ex_wordnet, "sword": ex_sword,
    "fortune": ex_fortune, "plain": ex_plain, "rst": ex_rst, "pod": ex_pod,
    "roff": ex_roff, "html": ex_html,
}

# ------------------------------------------------------------ normalisation
DECOR = re.compile(r"^[\s=\-~^*+#_|`.:'\"<>/\\]*$")


def paragraphs(text):
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = text.replace("\u00a0", " ").replace("\t", "    ")
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", text)
    cur = []
    for line in text.split("\n"):
        line = line.rstrip()
        if line and DECOR.match(line) and len(line.strip()) >= 3:
            continue  # rule lines, table borders, heading underlines
        if not line.strip():
            if cur:
                yield cur
                cur = []
            continue
        cur.append(line)
    if cur:
        yield cur


def clean_para(lines):
    ind = min(len(l) - len(l.lstrip(" ")) for l in lines)
    lines = [l[ind:] for l in lines]
    p = "\n".join(lines)
    letters = sum(c.isalpha() for c in p)
    if letters < 2:
        return None
    nonascii = sum(ord(c) > 127 and c.isalpha() for c in p)
    if nonascii > 0.2 * letters:
        return None  # other scripts (CJK, Cyrillic, ...)
    return p


DEDUP_MIN = 48


def dedup_key(p):
    """Key for exact-duplicate removal, or None for short paragraphs (headings
    such as NAME, SYNOPSIS, Example:), which are kept so documents stay whole."""
    n = re.sub(r"\s+", " ", p).strip().lower()
    if len(n) < DEDUP_MIN:
        return None
    return hashlib.sha1(n.encode("utf-8")).digest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-download", action="store_true", help="use what is already in data/corpus/raw/")
    args = ap.parse_args()
    os.makedirs(OUTDIR, exist_ok=True)
    seen = set()
    chunks = []  # (package, text)
    manifest = []
    for pkg, version, lic, exname, patterns in SOURCES:
        if args.no_download and os.path.isdir(pkgdir(pkg)):
            debs = sorted(glob.glob(os.path.join(RAW, "debs", pkg + "_*.deb")))
            used = run(["dpkg-deb", "-f", debs[-1], "Version"]).strip()
            deb, note = debs[-1], ("" if used == version else "pinned %s, found %s" % (version, used))
        else:
            used, deb, note = fetch(pkg, version)
        with open(deb, "rb") as f:
            deb_sha = hashlib.sha256(f.read()).hexdigest()
        root = pkgdir(pkg)
        files = []
        for pat in patterns:
            files += sorted(glob.glob(os.path.join(root, pat), recursive=True))
        files = [f for f in files if "/translations/" not in f]
        n_files = n_paras = n_dup = n_bytes = 0
        for path in files:
            for name, text in EXTRACTORS[exname](path):
                n_files += 1
                cur, cur_len = [], 0
                for lines in paragraphs(text):
                    p = clean_para(lines)
                    if p is None:
                        continue
                    k = dedup_key(p)
                    if k is not None:
                        if k in seen:
                            n_dup += 1
                            continue
                        seen.add(k)
                    n_paras += 1
                    b = len(p.encode("utf-8")) + 2
                    n_bytes += b
                    if cur and cur_len + b > CHUNK_BYTES:
                        chunks.append((pkg, "\n\n".join(cur)))
                        cur, cur_len = [], 0
                    cur.append(p)
                    cur_len += b
                if cur:
                    chunks.append((pkg, "\n\n".join(cur)))
        manifest.append((pkg, used, lic, deb_sha, n_files, n_paras, n_dup, n_bytes, " ".join(patterns), note))
        print("%-22s %-22s files %5d paragraphs %8d dropped-dup %7d bytes %10d %s"
              % (pkg, used, n_files, n_paras, n_dup, n_bytes, note), flush=True)

    train, held = [], []
    held_by_pkg = {}
    for i, (pkg, c) in enumerate(chunks):
        if i % HOLDOUT_EVERY == HOLDOUT_PHASE:
            held.append(c)
            held_by_pkg[pkg] = held_by_pkg.get(pkg, 0) + len(c.encode("utf-8"))
        else:
            train.append(c)
    paths = {}
    for name, part in (("train.txt", train), ("heldout.txt", held)):
        paths[name] = os.path.join(OUTDIR, name)
        with open(paths[name], "w", encoding="utf-8") as f:
            f.write(SEP.join(part))
            f.write("\n")
    sums = {}
    for name, p in paths.items():
        with open(p, "rb") as f:
            data = f.read()
        sums[name] = (hashlib.sha256(data).hexdigest(), len(data))
    with open(MANIFEST, "w", encoding="utf-8") as f:
        f.write("# qattn corpus manifest, written by data/build_corpus.py\n")
        f.write("# bytes = UTF-8 bytes of deduplicated, normalised paragraphs contributed; "
                "heldout_bytes = of those, in the held-out split\n")
        f.write("package\tversion\tlicense\tdeb_sha256\tdocuments\tparagraphs\tdropped_duplicates\tbytes\theldout_bytes\tfiles\tnote\n")
        for pkg, used, lic, sha, nf, npar, nd, nb, pats, note in manifest:
            f.write("\t".join(str(x) for x in (pkg, used, lic, sha, nf, npar, nd, nb, held_by_pkg.get(pkg, 0), pats, note)) + "\n")
        tot = sum(m[7] for m in manifest)
        f.write("# total bytes %d in %d chunks; train.txt %d bytes sha256 %s; heldout.txt %d bytes sha256 %s (%.2f%%)\n"
                % (tot, len(chunks), sums["train.txt"][1], sums["train.txt"][0],
                   sums["heldout.txt"][1], sums["heldout.txt"][0],
                   100.0 * sums["heldout.txt"][1] / (sums["train.txt"][1] + sums["heldout.txt"][1])))
    with open(SUMS, "w") as f:
        for name in ("train.txt", "heldout.txt"):
            f.write("%s  %s\n" % (sums[name][0], name))
    print("chunks %d (held out %d); train.txt %d bytes, heldout.txt %d bytes"
          % (len(chunks), len(held), sums["train.txt"][1], sums["heldout.txt"][1]))
    print("wrote", MANIFEST, SUMS, OUTDIR)


if __name__ == "__main__":
    sys.exit(main())
