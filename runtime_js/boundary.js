// The value boundary: turns a value leaving the script into JSON text, or refuses it with the
// path of the first offender. Evaluated inside the runtime's strict closure (see hooks.js), so
// every intrinsic it uses was captured before any script code ran (the names the two files share
// are listed once, in dsh_workflow/_engines/script/prelude.py).
//
// Contract of materialize(value, root, maxDepth):
//   * returns JSON text, or undefined when the root value itself is undefined;
//   * an object property whose value is undefined is left out, as JSON.stringify does;
//   * throws a BoundaryError {path, reason} for anything JSON would corrupt or cannot carry;
//   * reads values the ordinary way (getters run; their result is what crosses), never mutates
//     them, and treats a "__proto__" key as an ordinary key;
//   * walks iteratively: its own stack use does not grow with the value's depth, so any value
//     within maxDepth crosses under the smallest stack limit (only a script's getter adds frames).
//
// Describing or rendering a value (describeKind, renderValue, renderParts) never throws: a
// value whose reads throw (a Proxy, a revoked Proxy, throwing getters or toString) gets a fixed
// text instead.

const boundaryErrors = new _WeakSet();

function BoundaryError(path, reason) {
  const e = _create(null);
  e.path = path.length > 160 ? _apply(_stringSlice, path, [0, 80]) + '…' + _apply(_stringSlice, path, [-60]) : path;
  e.reason = reason;
  _apply(_weakSetAdd, boundaryErrors, [e]);
  return e;
}

function isBoundaryError(e) {
  // Membership only: probing a caught value's prototype or properties could run a Proxy trap.
  return e !== null && typeof e === 'object' && _apply(_weakSetHas, boundaryErrors, [e]);
}

// True for a revoked Proxy: the one value on which Array.isArray throws.
function isRevoked(value) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  try {
    _ArrayIsArray(value);
    return false;
  } catch (_) {
    return true;
  }
}

function describeKind(value) {
  if (value === null) return 'null';
  const t = typeof value;
  if (t === 'object' || t === 'function') {
    if (isRevoked(value)) return 'a revoked Proxy';
    if (t === 'object') return _ArrayIsArray(value) ? 'an array' : 'an object';
  }
  if (t === 'string') return 'a string';
  if (t === 'undefined') return 'undefined';
  return 'a ' + t;
}

// A limit the script's own code hit while the runtime rendered a value (its toString or a
// getter ran out of memory or stack): limitKind's verdict, 'NULL' for a bare null (InternalCode.NULL,
// never sent: thrownRecord makes it MEMORY_IF_FULL), or null.
let renderLimit = null;

function noteRenderFailure(e) {
  if (renderLimit !== null) return;
  if (e === null) noteNull();
  renderLimit = e === null ? (nullWasOutOfMemory ? 'MEMORY' : 'NULL') : limitKind(e);
}

// _String(value) under try, never script text that throws.
function textOf(value, fallback) {
  try {
    const text = _String(value);
    return typeof text === 'string' ? text : fallback;
  } catch (e) {
    noteRenderFailure(e);
    return fallback;
  }
}

// Reads value[key] under try; undefined when the read throws.
function quietRead(value, key) {
  try {
    return value[key];
  } catch (e) {
    noteRenderFailure(e);
    return undefined;
  }
}

const UNRENDERABLE = '[unrenderable thrown value]';

// A value's text for log()/console output: an Error's text and stack, a plain object with a
// message its message, anything else its string form.
function renderValue(value) {
  if (value === null || typeof value !== 'object' || isRevoked(value)) {
    return isRevoked(value) ? '[a revoked Proxy]' : textOf(value, UNRENDERABLE);
  }
  const parts = renderParts(value);
  return parts.stack === '' ? parts.head : parts.head + '\n' + parts.stack;
}

// {head, stack} of an object: the head is its own text (for a non-Error object with a message,
// that message); the stack is a real Error's stack string, '' otherwise or when unreadable.
function renderParts(value) {
  const parts = _create(null);
  parts.stack = '';
  if (isRevoked(value)) {
    parts.head = '[a revoked Proxy]';
    return parts;
  }
  const real = _isError(value);
  let head = textOf(value, '');
  if (head === '' || head === '[object Object]') {
    const message = quietRead(value, 'message');
    if (typeof message === 'string' && message !== '') head = message;
    else if (head === '') head = real ? '[an Error with no name and no message]' : UNRENDERABLE;
  }
  parts.head = head;
  if (real) {
    const stack = quietRead(value, 'stack');
    if (typeof stack === 'string') {
      // QuickJS stacks are frame lines only; a forged one may repeat the head: drop that.
      parts.stack = _apply(_stringIndexOf, stack, [head]) === 0
        ? _apply(_stringSlice, stack, [head.length + 1]) : stack;
    }
  }
  return parts;
}

// The one-line form of a value a getter threw (no stack, so no runtime frames end up in a
// path's reason).
function renderBrief(value) {
  if (typeof value === 'string') return _stringify(value);
  if (value !== null && typeof value === 'object') return renderParts(value).head;
  return textOf(value, UNRENDERABLE);
}

// The limit an engine-made error stands for (an InternalCode of
// dsh_workflow/_engines/script/wire.py, spelled identically: MEMORY, INTERRUPTED, STACK), or
// null. Decided from what the script cannot forge by construction: a real Error object
// (Error.isError: no Proxy, no Object.create copy), not built by the script through the
// RangeError/InternalError constructors (their script instances are recorded), with the
// engine's prototype and the engine's own message. Never throws and never runs script code (an
// Error object is an ordinary object: no traps; the descriptor is read as own properties
// only).
function limitKind(e) {
  try {
    if (e === null || typeof e !== 'object' || !_isError(e)) return null;
    if (_apply(_weakSetHas, scriptErrors, [e])) return null;
    const d = _getOwnPropertyDescriptor(e, 'message');
    if (d === undefined || !_hasOwn(d, 'value')) return null;
    const proto = _getPrototypeOf(e);
    const message = d.value;
    if (proto === _InternalErrorPrototype) {
      if (message === 'out of memory') return 'MEMORY';
      if (message === 'interrupted') return 'INTERRUPTED';
      if (message === 'stack overflow') return 'STACK';
    }
    if (proto === _RangeErrorPrototype && message === 'Maximum call stack size exceeded') {
      return 'STACK';
    }
  } catch (_) {
    // unreachable for a real Error; a failure here is no evidence of a limit
  }
  return null;
}

function keyPath(path, key) {
  return _identifier.test(key) ? path + '.' + key : path + '[' + _stringify(key) + ']';
}

function materialize(root, rootLabel, maxDepth) {
  // One frame per open object or array on the current path, reused by depth: a null-prototype
  // record in a null-prototype table, so no accessor a script installed runs here.
  const frames = _create(null);
  let top = -1;

  // The path of the value being looked at: the root, then each open frame's current key.
  function pathTo(level) {
    let path = rootLabel;
    for (let i = 0; i < level; i++) {
      const f = frames[i];
      path = f.isArray ? path + '[' + f.key + ']' : keyPath(path, f.key);
    }
    return path;
  }

  function read(value, key) {
    try {
      return value[key];
    } catch (e) {
      // A limit hit inside a getter is that limit, not a property that failed to read; a bare
      // null may be an out-of-memory the engine could not even describe.
      if (e === null) noteNull();  // while the value being copied still holds its memory
      if (isBoundaryError(e) || e === null || limitKind(e) !== null) throw e;
      throw BoundaryError(pathTo(top + 1), 'reading the value threw: ' + renderBrief(e));
    }
  }

  function checkSymbols(value) {
    const symbols = _getOwnPropertySymbols(value);
    for (let i = 0; i < symbols.length; i++) {
      const d = _getOwnPropertyDescriptor(value, symbols[i]);
      if (d !== undefined && d.enumerable) {
        throw BoundaryError(pathTo(top + 1), 'symbol-keyed properties are not JSON data');
      }
    }
  }

  // Opens an object or array at depth top + 1: checks it and pushes its frame.
  function open(value) {
    const depth = top + 1;
    if (depth >= maxDepth) {
      throw BoundaryError(pathTo(depth), 'nesting deeper than ' + maxDepth + ' levels is not supported (max_value_depth=' + maxDepth + ')');
    }
    if (isRevoked(value)) throw BoundaryError(pathTo(depth), 'a revoked Proxy is not JSON data');
    for (let i = 0; i < depth; i++) {
      if (frames[i].value === value) throw BoundaryError(pathTo(depth), 'circular references are not JSON data');
    }
    const isArray = _ArrayIsArray(value);
    const proto = _getPrototypeOf(value);
    let keys = null;
    let length;
    if (isArray) {
      if (proto !== _ArrayPrototype) {
        throw BoundaryError(pathTo(depth), 'only plain objects and arrays are JSON data (exotic prototype)');
      }
      length = value.length;
      keys = _keys(value);
      if (keys.length !== length) {
        for (let i = 0; i < keys.length; i++) {
          if (!_index.test(keys[i])) {
            throw BoundaryError(keyPath(pathTo(depth), keys[i]), 'arrays with non-index properties are not JSON data');
          }
        }
      }
      keys = null;
    } else {
      if (proto !== _ObjectPrototype && proto !== null) {
        throw BoundaryError(pathTo(depth), 'only plain objects and arrays are JSON data (exotic prototype: '
          + 'Date, Map, Set, class instances, errors and typed arrays cannot cross)');
      }
      keys = _keys(value);
      length = keys.length;
    }
    checkSymbols(value);
    let f = frames[depth];
    if (f === undefined) {
      f = _create(null);
      frames[depth] = f;
    }
    f.value = value;
    f.isArray = isArray;
    f.keys = keys;
    f.length = length;
    f.index = 0;
    f.key = null;
    f.text = isArray ? '[' : '{';
    f.first = true;
    top = depth;
  }

  let value = root;
  for (;;) {
    // 1. The value at hand becomes text (undefined: left out), or opens a frame (text null).
    let text = null;
    switch (typeof value) {
      case 'string':
        text = _stringify(value);
        break;
      case 'number':
        if (!_isFinite(value)) throw BoundaryError(pathTo(top + 1), 'non-finite numbers (NaN, Infinity) are not JSON data');
        text = _stringify(value);
        break;
      case 'boolean':
        text = value ? 'true' : 'false';
        break;
      case 'undefined':
        if (top >= 0 && frames[top].isArray) {
          throw BoundaryError(pathTo(top + 1), 'undefined inside an array is not JSON data (use null)');
        }
        text = undefined;
        break;
      case 'bigint':
        throw BoundaryError(pathTo(top + 1), 'bigints are not JSON data (convert with Number() or String())');
      case 'symbol':
        throw BoundaryError(pathTo(top + 1), 'symbols are not JSON data');
      case 'function':
        throw BoundaryError(pathTo(top + 1), 'functions are not JSON data');
      default:
        if (value === null) text = 'null';
        else open(value);
    }
    // 2. Hand the text to the open frame and find the next value, closing finished frames.
    for (;;) {
      if (top < 0) return text;
      const f = frames[top];
      if (text !== null) {
        if (text !== undefined) {
          f.text += f.isArray ? (f.first ? text : ',' + text)
            : (f.first ? '' : ',') + _stringify(f.key) + ':' + text;
          f.first = false;
        }
      }
      if (f.index < f.length) {
        const i = f.index++;
        if (f.isArray) {
          f.key = i;
          if (!_hasOwn(f.value, i)) throw BoundaryError(pathTo(top + 1), 'sparse arrays are not JSON data');
          value = read(f.value, i);
        } else {
          f.key = f.keys[i];
          value = read(f.value, f.key);
        }
        break;
      }
      text = f.text + (f.isArray ? ']' : '}');
      f.value = undefined;
      f.keys = null;
      top--;
    }
  }
}

// ---- the return value as JSON.stringify makes it (docs/scripts.md, "The return value") ----
//
// Contract of jsonText(root, rootLabel, maxDepth, sink):
//   * returns the JSON text JSON.stringify(root) gives, or undefined where it gives undefined;
//     it follows JSON.stringify's steps: toJSON(key) is called on objects (a Date becomes its
//     ISO string), Number/String/Boolean boxes become their primitive, undefined, functions and
//     symbols are left out of objects and become null in arrays (an empty slot too), NaN and
//     ±Infinity become null, and any other object contributes its own enumerable string-keyed
//     properties (a Map, a Set or a Promise becomes {});
//   * each lossy step is noted in `sink` (see newWarnings) with its path. An undefined object
//     property and a top-level undefined are not lossy (they are how a script leaves a field
//     out), and neither is toJSON, which the script wrote or asked for;
//   * throws a BoundaryError for what JSON.stringify throws on: a BigInt, a cycle, a revoked
//     Proxy; also for nesting deeper than maxDepth;
//   * a throw from the script's own code (a getter, toJSON, a Proxy trap, valueOf) is thrown
//     as a ScriptThrow {error, path}: the run's end records it as the script's own error. A
//     limit (memory, stack, CPU: limitKind) or a bare null passes through unwrapped.
// Deviation, kept on purpose: a boxed primitive is recognised only when its prototype is not
// Object.prototype or null (a box whose prototype the script reset crosses as an object).

const _Number = Number;
const _numberValueOf = Number.prototype.valueOf;
const _stringValueOf = String.prototype.valueOf;
const _booleanValueOf = Boolean.prototype.valueOf;
const _bigintValueOf = typeof BigInt === 'function' ? BigInt.prototype.valueOf : null;
const _PromisePrototype = Promise.prototype;
//: Warnings a run keeps in full; later ones are only counted (one "... and N more" line).
const MAX_WARNINGS = 20;

const scriptThrows = new _WeakSet();

function ScriptThrow(error, path) {
  const t = _create(null);
  t.error = error;
  t.path = path.length > 160 ? _apply(_stringSlice, path, [0, 80]) + '…' + _apply(_stringSlice, path, [-60]) : path;
  _apply(_weakSetAdd, scriptThrows, [t]);
  return t;
}

function isScriptThrow(e) {
  return e !== null && typeof e === 'object' && _apply(_weakSetHas, scriptThrows, [e]);
}

// A run's warnings: the first MAX_WARNINGS texts and how many there were in all.
function newWarnings() {
  const sink = _create(null);
  sink.texts = _create(null);
  sink.total = 0;
  return sink;
}

// The warnings as a JSON array text ('' when there are none), bounded.
function warningsText(sink) {
  if (sink.total === 0) return '';
  const kept = sink.total < MAX_WARNINGS ? sink.total : MAX_WARNINGS;
  let text = '[';
  for (let i = 0; i < kept; i++) text += (i === 0 ? '' : ',') + _stringify(sink.texts[i]);
  if (sink.total > kept) text += ',' + _stringify('... and ' + (sink.total - kept) + ' more');
  return text + ']';
}

// True when `valueOf` accepts `value` as its receiver (a brand check: runs no script code).
function branded(valueOf, value) {
  if (valueOf === null) return false;
  try {
    _apply(valueOf, value, []);
    return true;
  } catch (_) {
    return false;
  }
}

// The name of an object's kind for a warning ('Promise', 'Map', a class name), read from data
// properties only (no getter runs); 'object' when there is none.
function kindName(value) {
  let proto = value;
  for (let steps = 0; steps < 16; steps++) {
    proto = _getPrototypeOf(proto);
    if (proto === null || proto === _ObjectPrototype) return 'object';
    if (proto === _PromisePrototype) return 'Promise';
    const c = _getOwnPropertyDescriptor(proto, 'constructor');
    if (c !== undefined && _hasOwn(c, 'value') && typeof c.value === 'function') {
      const n = _getOwnPropertyDescriptor(c.value, 'name');
      if (n !== undefined && _hasOwn(n, 'value') && typeof n.value === 'string' && n.value !== '') {
        return n.value;
      }
    }
  }
  return 'object';
}

function article(name) {
  const c = _apply(_charCodeAt, name, [0]);
  // A, E, I, O (either case): 'an Error', 'a Uint8Array'
  return (c === 65 || c === 69 || c === 73 || c === 79 || c === 97 || c === 101 || c === 105
    || c === 111) ? 'an ' + name : 'a ' + name;
}

function jsonText(root, rootLabel, maxDepth, sink) {
  const frames = _create(null);
  let top = -1;

  function pathTo(level) {
    let path = rootLabel;
    for (let i = 0; i < level; i++) {
      const f = frames[i];
      path = f.isArray ? path + '[' + f.key + ']' : keyPath(path, f.key);
    }
    return path;
  }

  // A warning's path is cut as a BoundaryError's is (a key may be megabytes long).
  function warn(level, what) {
    if (sink.total < MAX_WARNINGS) {
      const path = pathTo(level);
      sink.texts[sink.total] = (path.length > 160 ? _apply(_stringSlice, path, [0, 80]) + '…'
        + _apply(_stringSlice, path, [-60]) : path) + ': ' + what;
    }
    sink.total++;
  }

  // Runs the script's own code (a getter, toJSON, a trap): a throw there is the script's.
  function scriptError(e, level) {
    if (e === null) noteNull();
    if (isBoundaryError(e) || isScriptThrow(e) || e === null || limitKind(e) !== null) return e;
    return ScriptThrow(e, pathTo(level));
  }

  function read(value, key, level) {
    try {
      return value[key];
    } catch (e) {
      throw scriptError(e, level);
    }
  }

  // Opens an object or array at depth top + 1 (JSON.stringify's SerializeJSONObject/Array).
  function open(value, proto) {
    const depth = top + 1;
    if (depth >= maxDepth) {
      throw BoundaryError(pathTo(depth), 'nesting deeper than ' + maxDepth + ' levels is not supported (max_value_depth=' + maxDepth + ')');
    }
    for (let i = 0; i < depth; i++) {
      if (frames[i].value === value) throw BoundaryError(pathTo(depth), 'circular references are not JSON data');
    }
    let isArray;
    let keys;
    let length;
    try {
      isArray = _ArrayIsArray(value);
      keys = _keys(value);
      if (isArray) {
        length = _Number(value.length);
        length = length > 0 ? (length < 9007199254740991 ? length - length % 1 : 9007199254740991) : 0;
        // Non-index keys follow the index keys: look at the last one first.
        if (keys.length > 0 && !_index.test(keys[keys.length - 1])) {
          let first = keys.length - 1;
          while (first > 0 && !_index.test(keys[first - 1])) first--;
          const name = keys[first].length > 40 ? _apply(_stringSlice, keys[first], [0, 39]) + '…' : keys[first];
          warn(depth, 'the array\'s non-index ' + (keys.length - first === 1 ? 'property ' : 'properties ')
            + _stringify(name) + (keys.length - first === 1 ? ' was' : ', ... were') + ' dropped');
        }
        keys = null;
      } else {
        length = keys.length;
        if (proto !== _ObjectPrototype && proto !== null) {
          const name = kindName(value);
          warn(depth, name === 'Promise' ? 'a Promise became {} (missing await?)'
            : name === 'object' ? 'an object with a non-plain prototype became a plain object'
            : article(name) + (length === 0 ? ' became {}' : ' became a plain object'));
        }
      }
      const symbols = _getOwnPropertySymbols(value);
      for (let i = 0; i < symbols.length; i++) {
        const d = _getOwnPropertyDescriptor(value, symbols[i]);
        if (d !== undefined && d.enumerable) {
          warn(depth, 'a symbol-keyed property was dropped');
          break;
        }
      }
    } catch (e) {
      throw scriptError(e, depth);
    }
    let f = frames[depth];
    if (f === undefined) {
      f = _create(null);
      frames[depth] = f;
    }
    f.value = value;
    f.isArray = isArray;
    f.keys = keys;
    f.length = length;
    f.index = 0;
    f.key = null;
    f.text = isArray ? '[' : '{';
    f.first = true;
    top = depth;
  }

  let value = root;
  let key = '';
  let hole = false;
  for (;;) {
    const level = top + 1;
    const inArray = top >= 0 && frames[top].isArray;
    // 1. toJSON, then a box's primitive (SerializeJSONProperty steps 2-4). `proto`: an
    // object's prototype, read once and handed to open().
    let t = typeof value;
    let proto = null;
    if ((t === 'object' && value !== null) || t === 'function' || t === 'bigint') {
      let toJSON;
      try {
        toJSON = value.toJSON;
      } catch (e) {
        if (isRevoked(value)) throw BoundaryError(pathTo(level), 'a revoked Proxy is not JSON data');
        throw scriptError(e, level);
      }
      if (typeof toJSON === 'function') {
        try {
          value = _apply(toJSON, value, [key]);
        } catch (e) {
          throw scriptError(e, level);
        }
        t = typeof value;
        if (t === 'object' && isRevoked(value)) {
          throw BoundaryError(pathTo(level), 'a revoked Proxy is not JSON data');
        }
      }
      if (t === 'object' && value !== null) {
        try {
          proto = _getPrototypeOf(value);
        } catch (e) {
          throw scriptError(e, level);
        }
        if (proto !== _ObjectPrototype && proto !== _ArrayPrototype && proto !== null) {
          try {
            if (branded(_numberValueOf, value)) value = _Number(value);
            else if (branded(_stringValueOf, value)) value = _String(value);
            else if (branded(_booleanValueOf, value)) value = _apply(_booleanValueOf, value, []);
            else if (branded(_bigintValueOf, value)) value = _apply(_bigintValueOf, value, []);
          } catch (e) {
            throw scriptError(e, level);
          }
          t = typeof value;
        }
      }
    }
    // 2. The value becomes text (undefined: left out of an object), or opens a frame.
    let text = null;
    switch (t) {
      case 'string':
        text = _stringify(value);
        break;
      case 'number':
        if (_isFinite(value)) {
          text = _stringify(value);
        } else {
          warn(level, (value !== value ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity') + ' became null');
          text = 'null';
        }
        break;
      case 'boolean':
        text = value ? 'true' : 'false';
        break;
      case 'bigint':
        throw BoundaryError(pathTo(level), 'bigints are not JSON data (convert with Number() or String())');
      case 'undefined':
      case 'function':
      case 'symbol': {
        const what = t === 'undefined' ? (hole ? 'an empty slot of a sparse array' : 'undefined')
          : t === 'function' ? 'a function' : 'a symbol';
        if (inArray) {
          warn(level, what + ' became null');
          text = 'null';
        } else {
          if (t !== 'undefined') warn(level, what + (top < 0 ? ' became null' : ' was dropped'));
          text = undefined;
        }
        break;
      }
      default:
        if (value === null) text = 'null';
        else open(value, proto);
    }
    // 3. Hand the text to the open frame and find the next value, closing finished frames.
    for (;;) {
      if (top < 0) return text;
      const f = frames[top];
      if (text !== null && text !== undefined) {
        f.text += f.isArray ? (f.first ? text : ',' + text)
          : (f.first ? '' : ',') + _stringify(f.key) + ':' + text;
        f.first = false;
      }
      if (f.index < f.length) {
        const i = f.index++;
        if (f.isArray) {
          f.key = i;
          key = '' + i;
          value = read(f.value, i, top + 1);
          hole = value === undefined && !quietHasOwn(f.value, i);
        } else {
          f.key = f.keys[i];
          key = f.key;
          value = read(f.value, key, top + 1);
          hole = false;
        }
        break;
      }
      text = f.text + (f.isArray ? ']' : '}');
      f.value = undefined;
      f.keys = null;
      top--;
    }
  }
}

// Object.hasOwn that answers true when asking throws (a Proxy trap): only used to word a warning.
function quietHasOwn(value, key) {
  try {
    return _hasOwn(value, key);
  } catch (_) {
    return true;
  }
}
