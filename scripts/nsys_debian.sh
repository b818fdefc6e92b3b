#!/usr/bin/env bash
# Debian's Nsight Systems 2023.4 (non-free, trixie), split in two: the part that records, to carry to the offline
# GPU node, and the part that reads what it recorded, for this CPU machine.
#
#   scripts/nsys_debian.sh            # into .nsys/ (or: scripts/nsys_debian.sh DIR)
#   source .nsys/env.sh               # nsys (stats, export) and QdstrmImporter on the PATH here
#
# It makes:
#   DIR/target.tar.xz   target-linux-x64/ (nsys profile, its injection libraries, CUPTI 12.4) without the CUDA 10
#                       and 11 CUPTIs: about 25 MB, the one file the GPU node needs (scripts/nsys_on_node.sh)
#   DIR/host/           target-linux-x64/nsys (the CLI alone: it cannot record) and host-linux-x64/ with
#                       QdstrmImporter and the libraries it loads (no Qt: no GUI), the stats reports and the Python
#                       they import: .qdstrm -> .nsys-rep -> nsys stats on a machine without a GPU
#   DIR/env.sh          puts DIR/host on the PATH
#   DIR/build/          the downloaded .debs and the unpacked packages (kept: a second run downloads nothing)
# Idempotent: what is already built is kept (delete DIR/target.tar.xz or DIR/host to rebuild them).
#
# Why trixie's: it is Debian's newest nsys (2023.4.4; sid has the same version rebuilt, with arrow split out), in a
# stable suite whose file names do not change under us. libssh-4 and libpfm4 (QdstrmImporter's two libraries from
# outside the package) come from this machine's own Debian release, so they match its libc and OpenSSL.
set -euo pipefail

DIR=${1:-.nsys}
SUITE=${NSYS_SUITE:-trixie}                       # where nsight-systems 2023.4.4 lives
# shellcheck source=/dev/null
HOST_SUITE=${NSYS_HOST_SUITE:-$(. /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-$SUITE}")}
MIRROR=${NSYS_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
MAX_TARGET_BYTES=$((29 * 1000 * 1000))            # the carry limit is 64 MiB with the 34 MB wheelhouse
WANT_VERSION=2023.4

log() { echo "nsys_debian: $*" >&2; }
die() { log "error: $*"; exit 1; }

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
BUILD=$DIR/build
mkdir -p "$BUILD/debs" "$BUILD/apt/lists/partial" "$BUILD/apt/cache/archives/partial" "$BUILD/apt/empty.d"

# -- 1. the four .debs, through apt with a sources list of our own (non-free is not enabled on this machine) -----
have_debs() {
    local p
    for p in nsight-systems-target nsight-systems libssh-4 libpfm4; do
        compgen -G "$BUILD/debs/${p}_*.deb" >/dev/null || return 1
    done
}
if ! have_debs; then
    [ -r "$KEYRING" ] || die "$KEYRING is missing: apt-get install debian-archive-keyring"
    cat >"$BUILD/apt/sources.list" <<EOF
deb [signed-by=$KEYRING] $MIRROR $SUITE non-free
deb [signed-by=$KEYRING] $MIRROR $HOST_SUITE main
EOF
    # this machine's own sources and pins left out (an empty folder for each): only the list above counts
    APT=(-o "Dir::Etc::sourcelist=$BUILD/apt/sources.list" -o "Dir::Etc::sourceparts=$BUILD/apt/empty.d"
         -o "Dir::Etc::preferences=$BUILD/apt/empty.d/none" -o "Dir::Etc::preferencesparts=$BUILD/apt/empty.d"
         -o "Dir::State::Lists=$BUILD/apt/lists" -o "Dir::Cache=$BUILD/apt/cache" -o "APT::Sandbox::User=$(id -un)")
    log "apt-get update ($SUITE non-free, $HOST_SUITE main; lists in $BUILD/apt)"
    apt-get "${APT[@]}" update -qq || die "apt-get update failed: is $MIRROR reachable?"
    WANT=("nsight-systems-target/$SUITE" "nsight-systems/$SUITE" "libssh-4/$HOST_SUITE" "libpfm4/$HOST_SUITE")
    log "downloading ${WANT[*]} (about 190 MB)"
    (cd "$BUILD/debs" && apt-get "${APT[@]}" download -q "${WANT[@]}") \
        || die "apt-get download failed: 'apt-cache -o Dir::Etc::sourcelist=$BUILD/apt/sources.list policy" \
               "nsight-systems' shows what $SUITE has (NSYS_SUITE=... picks another suite)"
fi
deb() { compgen -G "$BUILD/debs/$1_*.deb" | sort | tail -1; }
check_version() {  # the nsys at $1 is the version this script is for
    version=$("$1" --version 2>&1 || true)
    case "$version" in
        *" $WANT_VERSION."*) ;;
        *) die "expected nsys $WANT_VERSION at $1, got '$version': NSYS_SUITE picks the suite that has it" ;;
    esac
}

unpack() {  # unpack the newest DEB named $1 into BUILD/$1 (removed again at the end: only the .debs are kept)
    log "unpacking $(basename "$(deb "$1")")"
    rm -rf "${BUILD:?}/$1"
    dpkg-deb -x "$(deb "$1")" "$BUILD/$1"
}
TARGET_SRC=$BUILD/nsight-systems-target/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64
HOST_SRC=$BUILD/nsight-systems/usr/lib/nsight-systems/host-linux-x64
need_target=0; need_host=0
{ [ -s "$DIR/target.tar.xz" ] && [ ! "$(deb nsight-systems-target)" -nt "$DIR/target.tar.xz" ]; } || need_target=1
{ [ -e "$DIR/host/.complete" ] && [ ! "$(deb nsight-systems)" -nt "$DIR/host/.complete" ]; } || need_host=1
if [ "$need_target$need_host" != 00 ]; then
    unpack nsight-systems-target
    [ -x "$TARGET_SRC/nsys" ] || die "no target-linux-x64/nsys in $(deb nsight-systems-target): its layout changed"
    check_version "$TARGET_SRC/nsys"
fi
if [ "$need_host" = 1 ]; then
    unpack nsight-systems
    unpack libssh-4
    unpack libpfm4
    [ -x "$HOST_SRC/QdstrmImporter" ] || die "no host-linux-x64/QdstrmImporter in $(deb nsight-systems)"
fi

# -- 2. DIR/target.tar.xz: the recording part, without the CUDA 10 and 11 CUPTIs (82 MB unpacked) ----------------
if [ "$need_target" = 1 ]; then
    rm -rf "$BUILD/stage"
    mkdir -p "$BUILD/stage"
    cp -a "$TARGET_SRC" "$BUILD/stage/target-linux-x64"
    rm -f "$BUILD/stage/target-linux-x64"/libcupti.so.1[01].*
    log "compressing target-linux-x64 ($(du -sh "$BUILD/stage" | cut -f1)) with xz -9: about 2 minutes on 2 cores"
    # -9, not the default -6: 25.6 MB against 28.5, with room under the 29 MB the carry leaves
    tar -C "$BUILD/stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - target-linux-x64 \
        | xz -9 -T0 >"$DIR/target.tar.xz.part"
    mv "$DIR/target.tar.xz.part" "$DIR/target.tar.xz"
fi
size=$(stat -c %s "$DIR/target.tar.xz")
[ "$size" -le "$MAX_TARGET_BYTES" ] || die "$DIR/target.tar.xz is $size bytes, over $MAX_TARGET_BYTES: leave more out"

# -- 3. DIR/host: nsys's CLI and the importer's closure of libraries, without Qt ----------------------------------
if [ "$need_host" = 1 ]; then
    log "assembling $DIR/host"
    rm -rf "$DIR/host"
    mkdir -p "$DIR/host/target-linux-x64" "$DIR/host/host-linux-x64/python/lib"
    # the CLI alone: nsys stats and export run inside it; what records (nsys-launcher, libToolsInjection64.so, the
    # CUPTIs) stays out, so this nsys cannot record and helpers.nsys says so instead of trying
    cp -a "$TARGET_SRC/nsys" "$DIR/host/target-linux-x64/"
    H=$DIR/host/host-linux-x64
    cp -a "$HOST_SRC/QdstrmImporter" "$HOST_SRC/reports" "$H/"
    # nsys runs the reports in its own Python, whose path is host-linux-x64/python/lib alone (PYTHONPATH is not
    # read): Debian moved nsysstats.py out of it, and without it every report fails ("No module named 'nsysstats'")
    cp -a "$HOST_SRC/python/lib/"*.py "$TARGET_SRC/python/lib/"{nsysstats,gpustats}.py "$H/python/lib/"
    # QdstrmImporter finds its libraries beside it (RPATH $ORIGIN); the two from outside the package go there too
    cp -L "$BUILD/libssh-4/usr/lib/x86_64-linux-gnu/libssh.so.4" "$H/libssh.so.4"
    ln -sf libssh.so.4 "$H/libssh.so"  # the importer asks for libssh.so, which only the -dev package links
    cp -L "$BUILD/libpfm4/usr/lib/x86_64-linux-gnu/libpfm.so.4" "$H/libpfm.so.4"
    # the libraries QdstrmImporter loads (ldd; it dlopens none beyond them: LD_DEBUG=files on an import) that the
    # package has, the package's copy even where this machine has one of that name; the rest of host-linux-x64 (the
    # GUI and its Qt: 360 of its 430 MB) stays out. Repeated until nothing new comes: each copy can ask for more.
    for _ in $(seq 10); do
        added=0
        for lib in $(cd "$H" && ldd ./QdstrmImporter | awk '$2 == "=>" {print $1}'); do
            if [ ! -e "$H/$lib" ] && [ -e "$HOST_SRC/$lib" ]; then
                cp -L "$HOST_SRC/$lib" "$H/$lib"
                added=1
            fi
        done
        [ "$added" = 1 ] || break
    done
    touch "$DIR/host/.complete"
fi
still=$(cd "$DIR/host/host-linux-x64" && ldd ./QdstrmImporter | awk '/not found/ {print $1}')
[ -z "$still" ] || die "QdstrmImporter misses $still: install it with apt-get, or copy it into $DIR/host/host-linux-x64"

cat >"$DIR/env.sh" <<EOF
# source $DIR/env.sh: Debian's nsys $WANT_VERSION host part (nsys stats/export, QdstrmImporter) on the PATH.
# No LD_LIBRARY_PATH: QdstrmImporter finds its libraries beside it (RPATH \$ORIGIN), and one set here would
# put its boost, protobuf and arrow before every other program's. No PYTHONPATH: nsys's own Python does not read
# it; nsysstats.py is copied into host-linux-x64/python/lib, where it looks.
export NSYS_HOST_DIR=$DIR/host
export PATH=$DIR/host/target-linux-x64:$DIR/host/host-linux-x64:\$PATH
EOF

rm -rf "${BUILD:?}"/{nsight-systems-target,nsight-systems,libssh-4,libpfm4,stage}  # 800 MB; the .debs stay

# -- 4. does it answer? ---------------------------------------------------------------------------------------------
check_version "$DIR/host/target-linux-x64/nsys"
"$DIR/host/host-linux-x64/QdstrmImporter" --version >/dev/null
# --help-reports exits 1 even when it lists them all: read what it printed
reports=$("$DIR/host/target-linux-x64/nsys" stats --help-reports 2>&1 || true)
for r in cuda_gpu_kern_sum cuda_api_sum nvtx_sum; do
    grep -q "^  $r\b" <<<"$reports" || die "nsys stats --help-reports does not list $r: $DIR/host is incomplete"
done
log "ok: $version"
log "  $DIR/target.tar.xz  $size bytes (carry this one file to the GPU node)"
log "  $DIR/host           $(du -sh "$DIR/host" | cut -f1) (this machine only)"
log "  source $DIR/env.sh  # nsys and QdstrmImporter on the PATH"
