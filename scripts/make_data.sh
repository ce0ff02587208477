#!/usr/bin/env bash
# make data: a default multi-domain corpus and MMLU for machines without ../shared/data.
#
#   scripts/make_data.sh [--out DIR] [--cap-mb N] [--domains a,b,...] [--force] [--no-mmlu]
#
# Corpus (DIR/corpus/<domain>/part-NNN.jsonl, one {"text": ...} per line, the layout of
# ../shared/data/corpus) from text that Debian packages hold:
#   dictionary_gcide  dict-gcide's gcide.dict.dz, 25 consecutive entries per document
#   manpages          manpages + manpages-dev, rendered with man -l | col -bx
#   latex             *.tex(.gz) of texlive-{latex-base,latex-recommended,science}-doc
#   code_python       the Python standard library (/usr/lib/python3.X, tests excluded)
#   licenses          /usr/share/common-licenses/*, then /usr/share/doc/*/copyright
# Packages that are not installed are fetched with `apt-get download` and unpacked with
# `dpkg -x` into DIR/.debs (no root needed). Documents longer than 16,000 characters are cut
# at line boundaries, exact duplicate pieces dropped, pieces under 200 characters dropped;
# shards hold at most 4 MB. Sources are visited in a fixed pseudo-random order (Python's
# random.Random(1234) over the sorted list) and each domain stops at --cap-mb MB of text
# (default 8), so a capped domain samples all its sources. JSON is written by python3's json
# module. DIR/corpus/stats.json records documents and bytes per domain.
#
# MMLU: the official release (https://people.eecs.berkeley.edu/~hendrycks/data.tar) is
# fetched into DIR/mmlu/{dev,val,test}; without network the script says where to put it.
#
# Idempotent: a finished domain (DIR/corpus/<domain>/.done) and a complete DIR/mmlu are kept;
# --force rebuilds. When ../shared/data exists, the tools use it and this script does nothing
# unless --force or --out is given.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
out="$here/data"
cap_mb=8
force=0
out_given=0
want_mmlu=1
all_domains="dictionary_gcide manpages latex code_python licenses"
domains=$all_domains
MMLU_URL=https://people.eecs.berkeley.edu/~hendrycks/data.tar

usage() { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
    --out) out=$2; out_given=1; shift 2 ;;
    --cap-mb) cap_mb=$2; shift 2 ;;
    --domains) domains=${2//,/ }; shift 2 ;;
    --force) force=1; shift ;;
    --no-mmlu) want_mmlu=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "make_data: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
case $cap_mb in ''|*[!0-9.]*) echo "make_data: --cap-mb expects a number of MB, got '$cap_mb'" >&2; exit 2 ;; esac
for d in $domains; do
    case " $all_domains " in *" $d "*) ;; *) echo "make_data: unknown domain '$d' (known: $all_domains)" >&2; exit 2 ;; esac
done
command -v python3 >/dev/null || { echo "make_data: python3 is needed (JSON writing)" >&2; exit 1; }

shared="$(cd "$here/.." && pwd)/shared/data"
if [ -d "$shared/corpus" ] && [ -d "$shared/mmlu" ] && [ "$force" = 0 ] && [ "$out_given" = 0 ]; then
    echo "make_data: $shared holds the corpus and MMLU; the tools find it there. Nothing to do."
    echo "           (run with --force to build data/ from Debian packages anyway)"
    exit 0
fi

mkdir -p "$out/corpus" "$out/.debs"
out=$(cd "$out" && pwd)
debs="$out/.debs"
made=()

# ---------------------------------------------------------------- helpers

# The writer: reads NUL-separated documents on stdin, writes <dir>/part-NNN.jsonl. (Its
# program is passed with -c: stdin carries the documents.)
WRITER=$(cat <<'PY'
import hashlib, json, os, sys
outdir, cap, min_chars = sys.argv[1], float(sys.argv[2]) * 1e6, int(sys.argv[3])
MAX_PIECE, MAX_SHARD = 16000, 4 * 1000 * 1000
os.makedirs(outdir, exist_ok=True)
for f in os.listdir(outdir):
    if f.startswith("part-") or f == ".done":
        os.remove(os.path.join(outdir, f))
seen, docs, total, shard_no, shard_bytes, shard = set(), 0, 0, 0, 0, None

def pieces(text):
    """Cuts text at line boundaries into pieces of at most MAX_PIECE characters."""
    cur, n = [], 0
    for line in text.splitlines(keepends=True):
        while len(line) > MAX_PIECE:           # one giant line: hard cut
            if cur:
                yield "".join(cur); cur, n = [], 0
            yield line[:MAX_PIECE]; line = line[MAX_PIECE:]
        if n + len(line) > MAX_PIECE and cur:
            yield "".join(cur); cur, n = [], 0
        cur.append(line); n += len(line)
    if cur:
        yield "".join(cur)

def emit(piece):
    global docs, total, shard, shard_no, shard_bytes
    line = json.dumps({"text": piece}, ensure_ascii=False) + "\n"
    data = line.encode("utf-8")
    if shard is None or shard_bytes + len(data) > MAX_SHARD:
        if shard: shard.close()
        shard = open(os.path.join(outdir, "part-%03d.jsonl" % shard_no), "wb")
        shard_no += 1; shard_bytes = 0
    shard.write(data); shard_bytes += len(data); docs += 1; total += len(piece.encode("utf-8"))

def documents(stream):
    buf = b""
    while True:
        chunk = stream.read(1 << 16)
        if not chunk:
            break
        buf += chunk
        *done, buf = buf.split(b"\0")
        yield from done
    if buf:
        yield buf

for raw in documents(sys.stdin.buffer):
    text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
    for p in pieces(text):
        if len(p.strip()) < min_chars:
            continue
        h = hashlib.sha1(p.encode("utf-8")).digest()
        if h in seen:
            continue
        seen.add(h); emit(p)
        if total >= cap:
            break
    if total >= cap:
        break
if shard: shard.close()
print("%d %d" % (docs, total))
PY
)
write_domain() {  # domain min_chars
    python3 -c "$WRITER" "$out/corpus/$1" "$cap_mb" "$2"
}

# Lines of stdin in the fixed pseudo-random order used to sample capped domains.
shuffled() { python3 -c 'import random,signal,sys; signal.signal(signal.SIGPIPE, signal.SIG_DFL); l=sorted(sys.stdin.read().splitlines()); random.Random(1234).shuffle(l); print("\n".join(l))'; }

# Unpacks Debian packages (fetched with apt-get download) under $debs/root; prints the root.
unpack_debs() {
    local root="$debs/root" p deb
    mkdir -p "$root"
    for p in "$@"; do
        deb=$(ls "$debs"/"${p}"_*.deb 2>/dev/null | head -1 || true)
        if [ -z "$deb" ]; then
            (cd "$debs" && apt-get download "$p" >/dev/null 2>&1) || { echo "  cannot download $p (apt-get download failed: no network or no apt lists; try apt-get update)" >&2; return 1; }
            deb=$(ls "$debs"/"${p}"_*.deb | head -1)
        fi
        [ -e "$root/.unpacked-$p" ] || { dpkg -x "$deb" "$root" && touch "$root/.unpacked-$p"; }
    done
    echo "$root"
}

# ---------------------------------------------------------------- the domains

src_dictionary_gcide() {
    local dict=/usr/share/dictd/gcide.dict.dz idx=/usr/share/dictd/gcide.index root
    if [ ! -r "$dict" ]; then
        root=$(unpack_debs dict-gcide) || return 1
        dict=$root/usr/share/dictd/gcide.dict.dz; idx=$root/usr/share/dictd/gcide.index
    fi
    python3 - "$dict" "$idx" <<'PY'
import gzip, random, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # the writer stops reading at the cap
# dictd index: headword TAB offset TAB length, numbers in dictd's base64 digits
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
def num(s):
    v = 0
    for c in s: v = v * 64 + B64.index(c)
    return v
data = gzip.open(sys.argv[1]).read()
spans = set()
for line in open(sys.argv[2], encoding="utf-8", errors="replace"):
    f = line.rstrip("\n").split("\t")
    if len(f) >= 3 and not f[0].startswith("00"):   # 00-database-* / 00databaseinfo: metadata
        spans.add((num(f[1]), num(f[2])))
spans = sorted(spans)
groups = [spans[i:i + 25] for i in range(0, len(spans), 25)]
random.Random(1234).shuffle(groups)   # a capped domain then samples the whole alphabet
out = sys.stdout.buffer
for g in groups:
    doc = b"\n".join(data[o:o + n].strip() for o, n in g)
    out.write(doc.replace(b"\0", b"") + b"\0")
PY
}

src_manpages() {
    local files root=""
    if ! dpkg -s manpages manpages-dev >/dev/null 2>&1; then
        root=$(unpack_debs manpages manpages-dev) || return 1
        files=$(find "$root/usr/share/man" -name '*.gz' -path '*/man[0-9]*/*')
    else
        files=$(dpkg -L manpages manpages-dev | grep -E '/usr/share/man/man[0-9][^/]*/.*\.gz$')
    fi
    echo "$files" | shuffled | while read -r f; do
        [ -f "$f" ] || continue
        # .so stubs only point at another page
        zcat "$f" | grep -v '^\.\\"' | head -1 | grep -q '^\.so ' && continue
        MANWIDTH=80 man -E UTF-8 --no-hyphenation --no-justification -l "$f" 2>/dev/null | col -bx | tr -d '\0' || true
        printf '\0'
    done
}

src_latex() {
    local root
    root=$(unpack_debs texlive-latex-base-doc texlive-latex-recommended-doc texlive-science-doc) || return 1
    find "$root/usr/share/doc/texlive-doc" -type f \( -name '*.tex' -o -name '*.tex.gz' \) | shuffled |
    while read -r f; do
        case $f in *.gz) zcat "$f" ;; *) cat "$f" ;; esac | tr -d '\0' || true
        printf '\0'
    done
}

src_code_python() {
    local lib
    lib=$(ls -d /usr/lib/python3.[0-9]* 2>/dev/null | sort -V | tail -1 || true)
    if [ -z "$lib" ]; then
        local root
        root=$(unpack_debs libpython3.11-stdlib libpython3.11-minimal) || return 1
        lib=$root/usr/lib/python3.11
    fi
    find "$lib" -name '*.py' \
        -not -path '*/test/*' -not -path '*/tests/*' -not -path '*/idle_test/*' \
        -not -path '*/pydoc_data/*' -not -path '*/encodings/*' \
        -not -path '*/site-packages/*' -not -path '*/dist-packages/*' | shuffled |
    while read -r f; do tr -d '\0' <"$f"; printf '\0'; done
}

src_licenses() {
    # common licenses first, then copyright files, both sorted by path (not shuffled: the
    # boilerplate texts come first, as in ../shared/data)
    { find /usr/share/common-licenses -type f | sort; ls /usr/share/doc/*/copyright 2>/dev/null | sort; } |
    while read -r f; do [ -r "$f" ] && { tr -d '\0' <"$f"; printf '\0'; }; done
}

# ---------------------------------------------------------------- corpus

echo "make_data: corpus -> $out/corpus (cap ${cap_mb} MB per domain)"
for d in $domains; do
    dir="$out/corpus/$d"
    if [ -e "$dir/.done" ] && [ "$force" = 0 ]; then
        echo "  $d: kept ($(cat "$dir/.done"))"
        continue
    fi
    echo "  $d: building..."
    # The writer stops reading at the cap, so the source may die of SIGPIPE: only the
    # writer's status counts.
    set +e +o pipefail
    result=$( { "src_$d"; } 2> >(sed 's/^/    /' >&2) | write_domain "$d" 200)
    rc=$?
    set -e -o pipefail
    if [ "$rc" != 0 ] || [ -z "$result" ]; then
        echo "  $d: FAILED (see messages above); skipped" >&2
        continue
    fi
    read -r ndocs nbytes <<<"$result"
    if [ "$ndocs" = 0 ]; then
        echo "  $d: no text found; skipped" >&2
        continue
    fi
    echo "$ndocs documents, $nbytes bytes" >"$dir/.done"
    echo "  $d: made $ndocs documents, $(awk "BEGIN{printf \"%.1f\", $nbytes/1e6}") MB in $(ls "$dir" | grep -c '^part-') shard(s)"
    made+=("$d")
done

python3 - "$out/corpus" <<'PY'
import json, os, sys
root = sys.argv[1]
stats = {}
for d in sorted(os.listdir(root)):
    p = os.path.join(root, d)
    if not os.path.exists(os.path.join(p, ".done")):
        continue
    docs = chars = 0
    for f in sorted(os.listdir(p)):
        if f.endswith(".jsonl"):
            for line in open(os.path.join(p, f), encoding="utf-8"):
                docs += 1; chars += len(json.loads(line)["text"])
    stats[d] = {"docs": docs, "chars": chars}
tmp = os.path.join(root, "stats.json.tmp.%d" % os.getpid())
with open(tmp, "w") as f:
    json.dump(stats, f, indent=1, sort_keys=True); f.write("\n"); f.flush(); os.fsync(f.fileno())
os.replace(tmp, os.path.join(root, "stats.json"))
PY

# ---------------------------------------------------------------- MMLU

mmlu_complete() { [ "$(ls "$1"/test/*_test.csv 2>/dev/null | wc -l)" -ge 57 ] && [ -d "$1/dev" ] && [ -d "$1/val" ]; }

if [ "$want_mmlu" = 1 ]; then
    if mmlu_complete "$out/mmlu" && [ "$force" = 0 ]; then
        echo "make_data: MMLU kept ($out/mmlu)"
    else
        echo "make_data: fetching MMLU from $MMLU_URL ..."
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        if curl -fsSL --connect-timeout 15 --max-time 600 -o "$tmp/data.tar" "$MMLU_URL" 2>"$tmp/err" &&
           tar -xf "$tmp/data.tar" -C "$tmp" && mmlu_complete "$tmp/data"; then
            rm -rf "$out/mmlu.tmp.$$"
            mkdir -p "$out/mmlu.tmp.$$"
            mv "$tmp/data/dev" "$tmp/data/val" "$tmp/data/test" "$out/mmlu.tmp.$$/"
            rm -rf "$out/mmlu"
            mv "$out/mmlu.tmp.$$" "$out/mmlu"
            echo "make_data: made $out/mmlu ($(cat "$out"/mmlu/test/*.csv | wc -c) bytes of test CSV)"
            made+=(mmlu)
        else
            echo "make_data: could not fetch MMLU ($(head -c 200 "$tmp/err" 2>/dev/null || true))." >&2
            cat >&2 <<EOF
  Put the original MMLU release (Hendrycks et al., CSV, no header) here:
      $out/mmlu/dev/<subject>_dev.csv     (57 files)
      $out/mmlu/val/<subject>_val.csv     (57 files)
      $out/mmlu/test/<subject>_test.csv   (57 files)
  e.g. on a machine with network:
      curl -LO $MMLU_URL && tar -xf data.tar
      mkdir -p $out/mmlu && cp -r data/dev data/val data/test $out/mmlu/
  or pass --mmlu DIR to the experiments.
EOF
        fi
    fi
fi

if [ ${#made[@]} -gt 0 ]; then echo "make_data: made ${made[*]}"; else echo "make_data: nothing new made"; fi
