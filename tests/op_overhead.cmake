# bench/op_overhead_bench.c: the per-node cost of a run (a chain of tiny
# elementwise ops); run by hand, a tiny run here keeps it working.
add_executable(op_overhead_bench ${CMAKE_SOURCE_DIR}/bench/op_overhead_bench.c)
target_link_libraries(op_overhead_bench PRIVATE rlx)
add_test(NAME op_overhead_bench_smoke COMMAND op_overhead_bench --ops 20 --runs 5)
