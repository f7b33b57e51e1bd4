// Attack: an endless flood of log() calls in one synchronous stretch.
// expect: error RESOURCE_LIMIT
for (;;) log('flood');
