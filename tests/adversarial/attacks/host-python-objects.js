// Attack: look for Python objects the binding might expose: host callables among the global
// functions, non-standard native functions, wrapper objects and their repr.
// expect: completed {"suspicious": []}
const standard = new Set(['AggregateError', 'Array', 'ArrayBuffer', 'AsyncDisposableStack', 'BigInt',
  'BigInt64Array', 'BigUint64Array', 'Boolean', 'DOMException', 'DataView', 'Date', 'DisposableStack',
  'Error', 'EvalError', 'Float16Array', 'Float32Array', 'Float64Array', 'Function', 'Int16Array',
  'Int32Array', 'Int8Array', 'InternalError', 'Iterator', 'Map', 'Number', 'Object', 'Promise', 'Proxy',
  'RangeError', 'ReferenceError', 'RegExp', 'Set', 'String', 'SuppressedError', 'Symbol', 'SyntaxError',
  'TypeError', 'URIError', 'Uint16Array', 'Uint32Array', 'Uint8Array', 'Uint8ClampedArray', 'WeakMap',
  'WeakSet', 'decodeURI', 'decodeURIComponent', 'encodeURI', 'encodeURIComponent', 'escape', 'eval',
  'isFinite', 'isNaN', 'parseFloat', 'parseInt', 'unescape', 'queueMicrotask', 'atob', 'btoa',
  'structuredClone', 'agent', 'subagent', 'parallel', 'pipeline', 'phase', 'log', 'workflow',
  'settle', 'vote', 'first', 'gate', 'ask', 'checkpoint']);
const suspicious = [];
for (const name of Object.getOwnPropertyNames(globalThis)) {
  const v = globalThis[name];
  if (typeof v === 'function' && !standard.has(name)) suspicious.push('function ' + name);
  if (v !== null && typeof v === 'object') {
    const text = Object.prototype.toString.call(v);
    if (/python|quickjs|pyobject|capsule/i.test(text + ' ' + name)) suspicious.push('object ' + name);
  }
}
for (const sym of Object.getOwnPropertySymbols(globalThis)) {
  if (sym !== Symbol.toStringTag) suspicious.push('symbol ' + String(sym));
}
for (const key of ['python', 'quickjs', 'dsh', 'host']) {
  if (Symbol.for(key).description !== key) suspicious.push('registry ' + key);
}
return {suspicious};
