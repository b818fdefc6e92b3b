#!/usr/bin/env bash
# On the offline GPU node, from the repository root, with .nsys/target.tar.xz carried (scripts/nsys_debian.sh) and
# $OUT set: record the course's training steps under Debian's nsys 2023.4 (its target part: it writes a .qdstrm,
# which scripts/nsys_import.py turns into tables back here), and learn what helpers.nsys.measure says with it.
#
#   bash scripts/nsys_on_node.sh                      # STEPS=5 BATCH=32 IMAGE_SIZE=64 by default
#
# Writes under $OUT/nsys/:
#   record/steps.qdstrm       nsys profile -t cuda,nvtx -s none --cpuctxsw=none, capture range NVTX profiled_steps
#   record.stdout, .stderr    what nsys (and the program under it) printed
#   measure/steps.qdstrm      helpers.nsys.measure's own recording (the notebook's command: --trace=cuda,nvtx)
#   nsys_version.txt, nsys_status.txt, run.log
#   node.json                 the GPU, torch, the commands with their exit status and seconds, torch.profiler's
#                             kernel count for the same steps, and measure's state and line
# Each step logs and goes on when it fails; the whole takes under 3 minutes (each step has its own time limit).
set -uo pipefail

STEPS=${STEPS:-5}
BATCH=${BATCH:-32}
IMAGE_SIZE=${IMAGE_SIZE:-64}
TARBALL=${NSYS_TARBALL:-.nsys/target.tar.xz}
UNPACK=${NSYS_UNPACK:-/tmp/gpu-perf-lab-nsys-target}
RECORD_LIMIT_S=75   # nsys profile of the steps (about 30 s expected: torch's import, cuDNN's warm-up, the steps)
PYTHON_LIMIT_S=90   # torch.profiler's count, then measure's own recording (55 s limit inside)

[ -n "${OUT:-}" ] || { echo "nsys_on_node: set OUT to the folder whose files come back" >&2; exit 2; }
ROOT=$(pwd)
DEST=$OUT/nsys
mkdir -p "$DEST/record" "$DEST/measure"  # nsys does not make its output folder: it leaves the file in /tmp
log() { echo "nsys_on_node [$(date +%T), ${SECONDS}s]: $*" | tee -a "$DEST/run.log"; }
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}

gpus=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -2 | tr '\n' ' ')
log "node: $(hostname); GPU, driver: ${gpus:-nvidia-smi said nothing}"
log "python3: $(python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -1)"

# -- 1. the target part, unpacked into /tmp -------------------------------------------------------------------------
NSYS=$UNPACK/target-linux-x64/nsys
if [ -s "$TARBALL" ]; then
    # Python's tarfile where tar has no xz to call (it keeps the modes: nsys stays executable)
    if rm -rf "$UNPACK" && mkdir -p "$UNPACK" && { tar -xJf "$TARBALL" -C "$UNPACK" 2>/dev/null || python3 -c \
        'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$TARBALL" "$UNPACK"; }; then
        log "unpacked $TARBALL ($(stat -c %s "$TARBALL") bytes) into $UNPACK"
    else
        log "error: could not unpack $TARBALL into $UNPACK"
    fi
else
    log "error: no $TARBALL here: build it with scripts/nsys_debian.sh and carry it (.nsys/target.tar.xz)"
fi
if [ -x "$NSYS" ]; then
    "$NSYS" --version >"$DEST/nsys_version.txt" 2>&1 || log "nsys --version exited with $?"
    log "$(cat "$DEST/nsys_version.txt")"
    # status -e checks what recording needs (perf_event, paranoid level); it exits non-zero where something lacks
    "$NSYS" status -e >"$DEST/nsys_status.txt" 2>&1 || log "nsys status -e exited with $? (see nsys_status.txt)"
else
    log "error: no nsys at $NSYS: the recording is skipped; measure below says what the notebook would say"
fi

# -- 2. the steps under nsys profile, as measured on 2026-11-25 (1.9 MB for 20 steps) -------------------------------
RECORD_CMD=("$NSYS" profile -t "cuda,nvtx" -s none --cpuctxsw=none --capture-range=nvtx
            --nvtx-capture=profiled_steps --capture-range-end=stop --output="$DEST/record/steps" --force-overwrite=true
            python3 -m helpers.nsys_target --steps "$STEPS" --batch "$BATCH" --image-size "$IMAGE_SIZE")
RECORD_RC=""
RECORD_S=""
if [ -x "$NSYS" ]; then
    log "recording: ${RECORD_CMD[*]}"
    start=$SECONDS
    marker=$(mktemp)
    # torch.cuda.nvtx names its ranges with unregistered strings: nsys matches --nvtx-capture against registered
    # ones only unless this is 0, and would never start recording
    NSYS_NVTX_PROFILER_REGISTER_ONLY=0 timeout -k 10 "$RECORD_LIMIT_S" "${RECORD_CMD[@]}" \
        >"$DEST/record.stdout" 2>"$DEST/record.stderr"
    RECORD_RC=$?
    RECORD_S=$((SECONDS - start))
    log "nsys profile exited with $RECORD_RC after ${RECORD_S}s$([ "$RECORD_RC" = 124 ] && echo " (stopped at ${RECORD_LIMIT_S}s)")"
    tail -n 5 "$DEST/record.stdout" "$DEST/record.stderr" | tee -a "$DEST/run.log"
    # where nsys could not move its file into place it leaves it in /tmp (2023.4: "Failed to create ...")
    find /tmp -maxdepth 1 -name 'nsys-report-*' -newer "$marker" -exec cp -v {} "$DEST/record/" \; 2>/dev/null
    rm -f "$marker"
fi

# -- 3. torch.profiler's count of the same steps, then helpers.nsys.measure with this nsys: node.json ---------------
log "counting kernels with torch.profiler, then helpers.nsys.measure with $NSYS"
NSYS=$NSYS STEPS=$STEPS BATCH=$BATCH IMAGE_SIZE=$IMAGE_SIZE DEST=$DEST RECORD_RC=$RECORD_RC RECORD_S=$RECORD_S \
    RECORD_CMD="${RECORD_CMD[*]}" timeout -k 10 "$PYTHON_LIMIT_S" python3 - 2>&1 <<'PY' | tee -a "$DEST/run.log"
import datetime, json, os, time, traceback
from pathlib import Path

e = os.environ
dest = Path(e["DEST"])
steps, batch, size = int(e["STEPS"]), int(e["BATCH"]), int(e["IMAGE_SIZE"])
out = {"when": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "host": os.uname().nodename,
       "args": {"steps": steps, "batch": batch, "image_size": size},
       "record": {"command": e["RECORD_CMD"], "rc": int(e["RECORD_RC"]) if e["RECORD_RC"] else None,
                  "seconds": int(e["RECORD_S"]) if e["RECORD_S"] else None}}


def save() -> None:  # after every step: a later one that hangs past the time limit leaves what came before
    out.pop("files", None)  # last in the file, after what it lists
    out["files"] = {str(p.relative_to(dest)): p.stat().st_size for p in sorted(dest.rglob("*")) if p.is_file()}
    (dest / "node.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"nsys_on_node: node.json written ({', '.join(k for k in out if k not in ('files',))})", flush=True)


def attempt(key, fn):
    start = time.monotonic()
    try:
        return fn()
    except BaseException as err:  # noqa: BLE001 - every failure is recorded, and the next step still runs
        out[key + "_error"] = "".join(traceback.format_exception_only(type(err), err)).strip()
        print(f"nsys_on_node: {key} failed: {out[key + '_error']}", flush=True)
    finally:
        out[key + "_seconds"] = round(time.monotonic() - start, 1)
        save()


def environment():
    import torch

    out["torch"], out["torch_cuda"] = torch.__version__, torch.version.cuda
    out["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def count():
    from helpers import nsys_target

    out["expected_kernels"] = nsys_target.count_kernels(steps=steps, batch=batch, image_size=size)


def measure():
    from helpers import nsys

    tool = nsys.tool_at(e["NSYS"]) if os.access(e["NSYS"], os.X_OK) else None
    if tool is not None:
        out["nsys"] = {"path": tool.path, "version": tool.version, "can_record": tool.can_record,
                       "importer": tool.importer, "capture_end": tool.capture_end(), "reports": tool.report_names()}
    res = nsys.measure(steps=steps, batch=batch, image_size=size, expected_kernels=out.get("expected_kernels"),
                       timeout_s=55, folder=dest / "measure", tool=tool)
    out["measure"] = {"state": res.state, "line": res.line, "command": list(res.command),
                      "stats": str(res.stats) if res.stats is not None else None}
    print(f"nsys_on_node: measure: {res.state}: {res.line}", flush=True)


attempt("environment", environment)
attempt("count", count)
attempt("measure", measure)
PY
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || log "the Python part exited with $rc$([ "$rc" = 124 ] && echo " (stopped at ${PYTHON_LIMIT_S}s)")"
log "done in ${SECONDS}s; under $DEST:"
(cd "$DEST" && find . -type f -printf '%8s  %p\n' | sort -k2) | tee -a "$DEST/run.log"
exit 0
