#!/usr/bin/env bash
# Runs samu's GPU measurements from a source checkout, for a CUDA machine without uv or nox
# (the H200 image of docs/performance.md): packages run from packages/*/src, and wheels the
# image lacks (pydantic and the peers; see docs/performance.md, "Reproducing") are installed
# from ./.whl into /tmp/site when that folder exists.
#
#   scripts/gpu_from_source.sh OUT STAGE [STAGE ...]
#
# Stages, each under its own time limit, its log in OUT/STAGE.log and its line in OUT/summary:
#   tests       pytest -m gpu on the packages with GPU tests (PYTEST_SELECT=EXPR: -k EXPR)
#   sweep       python -m samu_kernels.benchmark --sweep          (OUT/sweep.json)
#   kernels     python -m samu_kernels.benchmark                  (OUT/kernels.json)
#   kernels_base  the same from the packages of .gpu/base, a baseline tree for A/B in one call
#               (git worktree add .gpu/base REV; carry .gpu/base)  (OUT/kernels_base.json)
#   fast_math   the same twice, SAMU_KERNELS_FAST_MATH=0 then 1   (OUT/fast_math_{0,1}.json)
#   peers       samu-bench run --compile --peers                  (OUT/peers.json)
#   default_set samu-bench run --compile --cuda-graphs --step-graphs  (OUT/default_set.json)
#   short_best  the hierarchical SAMU and RG-LRU rows of state2048_short, compiled too
#   graphs      the best rows compiled, without and with both kinds of CUDA graphs (OUT/graphs.json)
#   profile     samu-bench profile of scripts/configs/best_rows_compiled.toml (OUT/profile.json)
#   mlp         scripts/bench_mlp_backward.py                     (OUT/mlp.json)
#   ablation    scripts/ablate_block.py                           (OUT/ablation.json)
# A failed or timed-out stage is recorded and the next one runs. OUT/DONE marks the end.
# LIMIT_<stage>=SECONDS overrides a stage's time limit (LIMIT_tests=180), to fit one device call.
set -u
[ $# -ge 2 ] || { sed -n '2,/^# LIMIT_/p' "$0"; exit 2; }
out=$1; shift
stages="tests sweep kernels kernels_base fast_math peers default_set short_best graphs profile mlp ablation"
for stage in "$@"; do
    case " $stages " in
        *" $stage "*) ;;
        *) echo "unknown stage '$stage'; expected some of: $stages" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
cd "$(dirname "$0")/.."
wheels=""
if [ -d .whl ]; then
    # One install at a time: several copies of this script may start side by side (test
    # subsets in parallel processes), and concurrent installs into one target fail.
    flock /tmp/site.lock python3 -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > "$out/pip.log" 2>&1 \
        || echo "pip install failed" >> "$out/summary"
    wheels=/tmp/site:
fi
sources_of() {  # TREE: its packages' source folders, as a PYTHONPATH
    echo "$wheels$(echo "$1"/packages/*/src | tr ' ' :)"
}
export PYTHONPATH
PYTHONPATH=$(sources_of "$PWD")
export PYTHONUNBUFFERED=1
export SAMU_GIT_REVISION=${SAMU_GIT_REVISION:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.version.cuda)" >> "$out/gpu.txt" 2>&1

run_stage() {  # NAME LIMIT_S COMMAND...
    local name=$1 limit_override="LIMIT_$1" limit started
    limit=${!limit_override:-$2}
    shift 2
    started=$(date +%s)
    echo "=== $name (limit ${limit}s) $(date -u +%T)" | tee -a "$out/summary"
    timeout -k 10 "$limit" "$@" > "$out/$name.log" 2>&1
    echo "=== $name rc=$? $(( $(date +%s) - started ))s" | tee -a "$out/summary"
}

hierarchical_samu=samu:fused_output_fused_write_shared_sfu_grouped_prefix64_hierarchical_chunk32:fp32_fused_coords
rglru=rglru:fused_grouped_prefix32_hierarchical_chunk16
for stage in "$@"; do
    case $stage in
        tests) run_stage tests 600 python3 -m pytest -m gpu -q -p no:cacheprovider \
            ${PYTEST_SELECT:+-k "$PYTEST_SELECT"} packages/samu-{kernels,modules,bench} ;;
        sweep) run_stage sweep 480 python3 -m samu_kernels.benchmark --sweep --out "$out/sweep.json" ;;
        kernels) run_stage kernels 300 python3 -m samu_kernels.benchmark --out "$out/kernels.json" ;;
        kernels_base)
            if [ -d .gpu/base/packages ]; then
                run_stage kernels_base 300 env PYTHONPATH="$(sources_of "$PWD/.gpu/base")" \
                    python3 -m samu_kernels.benchmark --out "$out/kernels_base.json"
            else
                echo "=== kernels_base: no .gpu/base/packages (git worktree add .gpu/base REV)" \
                    | tee -a "$out/summary"
            fi ;;
        fast_math)
            for switch in 0 1; do
                run_stage "fast_math_$switch" 300 env SAMU_KERNELS_FAST_MATH=$switch python3 \
                    -m samu_kernels.benchmark --out "$out/fast_math_$switch.json"
            done ;;
        peers) run_stage peers 620 python3 -m samu_bench.cli run --compile --peers --out "$out/peers.json" ;;
        default_set) run_stage default_set 600 python3 -m samu_bench.cli run --compile \
            --cuda-graphs --step-graphs --out "$out/default_set.json" ;;
        short_best) run_stage short_best 150 python3 -m samu_bench.cli run --compile \
            --case state2048_short --row "$hierarchical_samu" --row "$rglru" --out "$out/short_best.json" ;;
        graphs) run_stage graphs 600 python3 -m samu_bench.cli run \
            --config scripts/configs/best_rows_cuda_graphs.toml --out "$out/graphs.json" ;;
        profile) run_stage profile 300 python3 -m samu_bench.cli profile \
            --config scripts/configs/best_rows_compiled.toml --out "$out/profile.json" ;;
        mlp) run_stage mlp 240 python3 scripts/bench_mlp_backward.py --out "$out/mlp.json" ;;
        ablation) run_stage ablation 600 python3 scripts/ablate_block.py --out "$out/ablation.json" ;;
    esac
done
touch "$out/DONE"
