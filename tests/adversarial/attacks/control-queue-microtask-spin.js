// Attack: an endless queueMicrotask chain running in the background while an agent() call is
// in flight.
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
const again = () => queueMicrotask(again);
again();
return await agent('x');
