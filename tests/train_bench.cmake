# The training benchmark (bench/train/train_bench.c): built here, run by
# bench/train/run.sh; a short run in ctest keeps it working.
add_executable(train_bench ${CMAKE_SOURCE_DIR}/bench/train/train_bench.c)
target_include_directories(train_bench PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(train_bench PRIVATE rlx_internal m)
add_test(NAME train_bench_smoke COMMAND train_bench --workload mlp,encoder,decoder-small --batch 2 --seq 16
                                        --warmup 1 --steps 1 --repeat 1)
