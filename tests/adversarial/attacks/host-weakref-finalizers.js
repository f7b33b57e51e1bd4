// Attack: schedule code that the garbage collector runs later (FinalizationRegistry, WeakRef),
// possibly outside any time limit or after the run ended.
// expect: completed {"WeakRef": "undefined", "FinalizationRegistry": "undefined", "gc": "undefined"}
return {WeakRef: typeof WeakRef, FinalizationRegistry: typeof FinalizationRegistry, gc: typeof gc};
