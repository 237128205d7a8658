#!/usr/bin/env bash
# Run every cargo-fuzz target for N seconds each (default 60), one after another on one core.
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
#   scripts/fuzz.sh            # 60 s per target
#   scripts/fuzz.sh 1800       # 30 min per target
#   scripts/fuzz.sh 60 set     # one target
# Corpora live in fuzz/corpus/TARGET (seeded from scenarios/, machines/ and fuzz/seeds/ on
# first run); a crash leaves its input in fuzz/artifacts/TARGET and stops the script with a
# non-zero exit. Each run ends with the CPU seconds the fuzzer itself used (build excluded).
set -euo pipefail
secs="${1:-60}"
shift || true
cd "$(dirname "$0")/../fuzz"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(scenario set config_file guest_output)
fi

seed() {
  local t="$1" dir="corpus/$1"
  [ -d "$dir" ] && return
  mkdir -p "$dir"
  case "$t" in
    scenario)
      cp ../scenarios/*.toml ../scenarios/validate/*.toml "$dir"/ ;;
    config_file)
      cp ../machines/*.toml ../scenarios/xsbench-small.toml "$dir"/ ;;
    set|guest_output)
      cp seeds/"$t"/* "$dir"/ ;;
  esac
}

# -a: debug assertions and overflow checks, so a wrapping sum is a crash, not a wrong result.
flags=(-O -a)
for t in "${targets[@]}"; do
  seed "$t"
  cargo +nightly fuzz build "${flags[@]}" "$t"
  echo "== fuzz target $t: ${secs} s"
  # -rss_limit_mb: any input that makes tierlab hold 2 GiB is a finding (no config may).
  # -timeout: one input taking 10 s is a hang.
  TIMEFORMAT="== fuzz target $t: %U s user + %S s system CPU, %R s wall"
  time cargo +nightly fuzz run "${flags[@]}" "$t" "corpus/$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=65536 -print_final_stats=1
done
