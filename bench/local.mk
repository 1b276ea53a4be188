# Filled by the benchmark issue (bench/: wheel and daemon benchmarks).
