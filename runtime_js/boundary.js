// The value boundary: turns a value leaving the script into JSON text, or refuses it with the
// path of the first offender. Evaluated inside the runtime's strict closure (see hooks.js), so
// every intrinsic it uses was captured before any script code ran.
//
// Contract of materialize(value, root, maxDepth):
//   * returns JSON text, or undefined when the root value itself is undefined;
//   * an object property whose value is undefined is left out, as JSON.stringify does;
//   * throws a BoundaryError {path, reason} for anything JSON would corrupt or cannot carry;
//   * reads values the ordinary way (getters run; their result is what crosses), never mutates
//     them, and treats a "__proto__" key as an ordinary key.

function BoundaryError(path, reason) {
  const e = _create(null);
  e.path = path.length > 160 ? _apply(_stringSlice, path, [0, 80]) + '…' + _apply(_stringSlice, path, [-60]) : path;
  e.reason = reason;
  return e;
}

function describeKind(value) {
  if (value === null) return 'null';
  if (_isArray(value)) return 'an array';
  const t = typeof value;
  if (t === 'object') return 'an object';
  if (t === 'string') return 'a string';
  return 'a ' + t;
}

function renderThrown(value) {
  // The error's own text, then its stack; a plain object with a message shows the message.
  try {
    if (value !== null && typeof value === 'object') {
      const stack = value.stack;
      const message = value.message;
      let head = _String(value);
      if (head === '[object Object]' && typeof message === 'string' && message !== '') {
        head = message;
      }
      if (typeof stack === 'string' && stack !== '') {
        return stack.indexOf(head) === 0 ? stack : head + '\n' + stack;
      }
      return head;
    }
    return _String(value);
  } catch (_) {
    return '[unrenderable thrown value]';
  }
}

// The thrown value's one-line form (no stack, so no runtime frames end up in a message).
function renderBrief(value) {
  try {
    return _String(value);
  } catch (_) {
    return '[unrenderable thrown value]';
  }
}

function keyPath(path, key) {
  return _identifier.test(key) ? path + '.' + key : path + '[' + _stringify(key) + ']';
}

function materialize(root, rootLabel, maxDepth) {
  // `stack` holds the objects on the current path (cycle detection); a null-prototype record
  // indexed by depth, so no Array.prototype accessor a script installed can run here.
  const stack = _create(null);

  function walk(value, path, depth, inArray) {
    switch (typeof value) {
      case 'string':
        return _stringify(value);
      case 'number':
        if (!_isFinite(value)) throw BoundaryError(path, 'non-finite numbers (NaN, Infinity) are not JSON data');
        return _stringify(value);
      case 'boolean':
        return value ? 'true' : 'false';
      case 'undefined':
        if (inArray) throw BoundaryError(path, 'undefined inside an array is not JSON data (use null)');
        return undefined;
      case 'bigint':
        throw BoundaryError(path, 'bigints are not JSON data (convert with Number() or String())');
      case 'symbol':
        throw BoundaryError(path, 'symbols are not JSON data');
      case 'function':
        throw BoundaryError(path, 'functions are not JSON data');
      default:
        break;
    }
    if (value === null) return 'null';
    if (depth >= maxDepth) {
      throw BoundaryError(path, 'nesting deeper than ' + maxDepth + ' levels is not supported (max_value_depth)');
    }
    for (let i = 0; i < depth; i++) {
      if (stack[i] === value) throw BoundaryError(path, 'circular references are not JSON data');
    }
    stack[depth] = value;
    let text;
    try {
      text = _isArray(value) ? walkArray(value, path, depth) : walkObject(value, path, depth);
    } finally {
      stack[depth] = undefined;
    }
    return text;
  }

  function read(value, key, path) {
    try {
      return value[key];
    } catch (e) {
      // A limit hit inside a getter is that limit, not a property that failed to read.
      if (isBoundaryError(e) || classify(e) !== null) throw e;
      throw BoundaryError(path, 'reading the value threw: ' + renderBrief(e));
    }
  }

  function checkSymbols(value, path) {
    const symbols = _getOwnPropertySymbols(value);
    for (let i = 0; i < symbols.length; i++) {
      const d = _getOwnPropertyDescriptor(value, symbols[i]);
      if (d !== undefined && d.enumerable) {
        throw BoundaryError(path, 'symbol-keyed properties are not JSON data');
      }
    }
  }

  function walkArray(value, path, depth) {
    if (_getPrototypeOf(value) !== _ArrayPrototype) {
      throw BoundaryError(path, 'only plain objects and arrays are JSON data (exotic prototype)');
    }
    const length = value.length;
    const keys = _keys(value);
    if (keys.length !== length) {
      for (let i = 0; i < keys.length; i++) {
        if (!_index.test(keys[i])) {
          throw BoundaryError(keyPath(path, keys[i]), 'arrays with non-index properties are not JSON data');
        }
      }
    }
    checkSymbols(value, path);
    let text = '[';
    for (let i = 0; i < length; i++) {
      const itemPath = path + '[' + i + ']';
      if (!_hasOwn(value, i)) throw BoundaryError(itemPath, 'sparse arrays are not JSON data');
      const item = walk(read(value, i, itemPath), itemPath, depth + 1, true);
      text += (i === 0 ? '' : ',') + item;
    }
    return text + ']';
  }

  function walkObject(value, path, depth) {
    const proto = _getPrototypeOf(value);
    if (proto !== _ObjectPrototype && proto !== null) {
      throw BoundaryError(path, 'only plain objects and arrays are JSON data (exotic prototype: '
        + 'Date, Map, Set, class instances, errors and typed arrays cannot cross)');
    }
    const keys = _keys(value);
    checkSymbols(value, path);
    let text = '{';
    let first = true;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      const itemPath = keyPath(path, key);
      const item = walk(read(value, key, itemPath), itemPath, depth + 1, false);
      if (item === undefined) continue;
      text += (first ? '' : ',') + _stringify(key) + ':' + item;
      first = false;
    }
    return text + '}';
  }

  try {
    return walk(root, rootLabel, 0, false);
  } catch (e) {
    if (isBoundaryError(e)) throw e;
    throw e;
  }
}

function isBoundaryError(e) {
  return e !== null && typeof e === 'object' && _getPrototypeOf(e) === null
    && typeof e.reason === 'string' && typeof e.path === 'string';
}
