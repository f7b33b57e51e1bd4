// Attack: try to catch the time-limit interrupt (and spin again in catch and finally).
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
try {
  for (;;) {}
} catch (e) {
  for (;;) {}
} finally {
  for (;;) {}
}
