// The script-facing hooks and the host-facing API of one run.
//
// This file is the body of a strict function `(config)` evaluated before any script
// code runs (the host splices boundary.js in after the captures below; the names the two files
// share are listed once, in dsh_workflow/_engines/script/prelude.py). It installs the hooks as
// globals and returns the host API; the host takes the API's functions and deletes the global
// that carried it, so scripts never see it.
//
// Cancellation is not handled here: the host stops the runtime's thread (or process) and
// refuses every later hook call, so nothing the script does after a cancel reaches the host.
//
// Security rules this file keeps (scripts share the realm with it):
//   * every intrinsic is captured here, before script code can replace it;
//   * runtime records are null-prototype objects and the outbox is a string, so no accessor a
//     script installs on Object.prototype or Array.prototype runs inside the runtime's own
//     bookkeeping (resolving a promise with a script's value still looks up its `then`);
//   * the runtime's promises carry their own `constructor` and Promise[Symbol.species] is
//     locked, so awaiting and chaining them never calls a replaced `then`;
//   * the host API (args, take, settle, result, pending) never runs script code, so
//     none of its functions is ever on the stack where a script could reach it; `start` runs
//     the body once and refuses a second call, and `args` works only before it;
//   * Error.prepareStackTrace is locked to undefined, so call sites (and the functions on the
//     stack) are never handed to a script;
//   * fatality is membership of a private WeakMap (holding the error's code and message as made):
//     a script can build a look-alike error object but never a fatal one;
//   * every cap is checked on a snapshot (a value read once) with captured intrinsics, and the
//     host checks what arrives again;
//   * the end of a run (onReturn/onThrow) reads what it needs of the script's value once, under
//     try, with a fixed fallback text, so every run whose body settled records exactly one
//     result whatever it threw;
//   * limit verdicts never come from a thrown object's text alone: see limitKind (boundary.js)
//     and the host side (script/thread.py), which confirms them with what it measured.
//
// Wire shapes (their one definition: dsh_workflow/_engines/script/wire.py; spelled identically,
// and tests/unit/test_wire.py checks that both sides name the same ones):
//   * hook messages in the outbox (HookKind): ["agent", id, prompt, options|null],
//     ["workflow", id, target, args], ["phase", title], ["log", text],
//     ["numbers", "clock"|"random", first, [n, ...]], ["numbers", "race", ordinal, [winner]],
//     ["cancel", [id, ...]], ["ask", id, "ask"|"checkpoint", question, options|null],
//     ["idle", n] (the script waits on nothing but its n open questions);
//   * settle entries (host -> runtime): [id, true, value], [id, true, null, {kind, message,
//     details}] (a failed child, with its reason), [id, false, code, message],
//     [id, false, "AgentFailure", message, {kind, message, details}], ["spent", tokens] or
//     ["spent", tokens, dollars];
//   * end records (Completed / Failed): {"ok":true,"value":...[,"warnings":[...]]} or
//     {"ok":false,"code":...,"error":...[,"thrown":true][,"stack":...]}, where code is a public
//     WorkflowErrorCode, null, or an InternalCode the host translates (dsh_workflow/_engines/
//     script/limits.py translate_end): MEMORY, STACK, INTERRUPTED, THROWN_NOTHING, MEMORY_IF_FULL,
//     UNRENDERABLE (and NULL, boundary.js's renderLimit, which never leaves the runtime).

const _Object = Object;
const _create = _Object.create;
const _defineProperty = _Object.defineProperty;
const _freeze = _Object.freeze;
const _getPrototypeOf = _Object.getPrototypeOf;
const _getOwnPropertyDescriptor = _Object.getOwnPropertyDescriptor;
const _getOwnPropertySymbols = _Object.getOwnPropertySymbols;
const _keys = _Object.keys;
const _hasOwn = _Object.hasOwn;
const _ObjectPrototype = _Object.prototype;
const _ArrayPrototype = Array.prototype;
const _ArrayIsArray = Array.isArray;
// Array.isArray that never throws: a revoked Proxy, whose kind can no longer be known, counts as
// an array, so each check that refuses arrays (agent() options) refuses it too.
const _isArray = function (value) {
  try {
    return _ArrayIsArray(value);
  } catch (_) {
    return true;
  }
};
const _isError = Error.isError;
const _construct = Reflect.construct;
const _setPrototypeOf = _Object.setPrototypeOf;
const _stringify = JSON.stringify;
const _parse = JSON.parse;
const _apply = Reflect.apply;
const _String = String;
const _isFinite = Number.isFinite;
const _Error = Error;
const _RangeError = RangeError;
const _RangeErrorPrototype = RangeError.prototype;
const _InternalError = typeof InternalError === 'function' ? InternalError : null;
const _InternalErrorPrototype = _InternalError === null ? null : _InternalError.prototype;
const _Promise = Promise;
const _then = Promise.prototype.then;
const _WeakSet = WeakSet;
const _weakSetAdd = WeakSet.prototype.add;
const _weakSetHas = WeakSet.prototype.has;
const _WeakMap = WeakMap;
const _weakMapGet = WeakMap.prototype.get;
const _weakMapSet = WeakMap.prototype.set;
const _identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const _index = /^(0|[1-9][0-9]*)$/;
const _regexpTest = RegExp.prototype.test;
const _stringSlice = String.prototype.slice;
const _stringIndexOf = String.prototype.indexOf;
const _stringRepeat = String.prototype.repeat;
// RegExp#test looks up `exec` on the regexp; make both patterns immune to a replaced exec.
_defineProperty(_identifier, 'exec', { value: RegExp.prototype.exec });
_defineProperty(_index, 'exec', { value: RegExp.prototype.exec });
_identifier.test = function (s) { return _apply(_regexpTest, _identifier, [s]); };
_index.test = function (s) { return _apply(_regexpTest, _index, [s]); };

_defineProperty(_Error, 'prepareStackTrace', {
  value: undefined, writable: false, enumerable: false, configurable: false,
});
// The runtime awaits and chains its own promises; a script must not be able to redirect that
// through a replaced Promise[Symbol.species] or Promise.prototype.constructor/then.
_defineProperty(_Promise, Symbol.species, {
  value: _Promise, writable: false, enumerable: false, configurable: false,
});

// Errors the script builds with RangeError/InternalError (or subclasses of them) are recorded
// here, so limitKind can tell them from the engine's own limit errors, which the engine makes
// from the intrinsic prototypes without calling any constructor. The script-visible
// constructors are wrappers: same name, length, prototype and [[Prototype]], and
// prototype.constructor points at them, so `instanceof`, `e.constructor === RangeError` and
// `class X extends RangeError` behave as before.
const scriptErrors = new _WeakSet();

function wrapErrorConstructor(Real, name) {
  const Wrapper = function (message, options) {
    const e = _construct(Real, arguments, new.target === undefined ? Wrapper : new.target);
    _apply(_weakSetAdd, scriptErrors, [e]);
    return e;
  };
  _defineProperty(Wrapper, 'name', { value: name, writable: false, enumerable: false, configurable: true });
  _defineProperty(Wrapper, 'length', { value: 1, writable: false, enumerable: false, configurable: true });
  _defineProperty(Wrapper, 'prototype', { value: Real.prototype, writable: false, enumerable: false, configurable: false });
  _setPrototypeOf(Wrapper, _getPrototypeOf(Real));
  _defineProperty(Real.prototype, 'constructor', { value: Wrapper, writable: true, enumerable: false, configurable: true });
  _defineProperty(globalThis, name, { value: Wrapper, writable: true, enumerable: false, configurable: true });
}

wrapErrorConstructor(_RangeError, 'RangeError');
if (_InternalError !== null) wrapErrorConstructor(_InternalError, 'InternalError');

// Property descriptors the hot paths hand to defineProperty: null-prototype records (so no
// `get`/`set`/`value` a script puts on Object.prototype is read into them), built once instead of
// once per call. OWN_CONSTRUCTOR is frozen; ITEM is refilled before each use and emptied after
// it (defineProperty on the runtime's own arrays runs no script code in between).
function descriptor(value, writable, enumerable, configurable) {
  const d = _create(null);
  d.value = value;
  d.writable = writable;
  d.enumerable = enumerable;
  d.configurable = configurable;
  return d;
}

const OWN_CONSTRUCTOR = _freeze(descriptor(_Promise, false, false, false));
const ITEM = descriptor(undefined, true, true, true);

function own(promise) {
  _defineProperty(promise, 'constructor', OWN_CONSTRUCTOR);
  return promise;
}

//__BOUNDARY__

const maxItems = config.maxItemsPerCall;
const maxDepth = config.maxValueDepth;
const maxPromptChars = config.maxPromptChars;
const maxLogChars = config.maxLogChars;
// Lossy steps of the return value's conversion to JSON (and of workflow() return values).
const runWarnings = newWarnings();

// ---- fatal errors --------------------------------------------------------------------------

// fatal error -> {code, message} as made: what the end of a run reports, whatever the script
// later did to the error object's own properties.
const fatal = new _WeakMap();

// Where a hook was misused: the script's own line and column of the first script frame on a
// stack (rows up to bodyLineOffset belong to the runtime; row 1 of the body follows the
// wrapper's header). Reads the stack through the captured native getter, never a script's.
const _stackGet = _getOwnPropertyDescriptor(_Error.prototype, 'stack').get;
const _indexOf = String.prototype.indexOf;
const _charCodeAt = String.prototype.charCodeAt;
const bodyLineOffset = config.bodyLineOffset;
const bodyHeaderChars = config.bodyHeaderChars;

const _fnToString = Function.prototype.toString;
const _lastIndexOf = String.prototype.lastIndexOf;
let bodyFn = null; // the compiled body, kept to read its source when a hook is misused

function readNumber(text, at) {
  let value = 0;
  let end = at;
  for (;;) {
    const c = _apply(_charCodeAt, text, [end]);
    if (!(c >= 48 && c <= 57)) break;
    value = value * 10 + (c - 48);
    end++;
  }
  return end === at ? null : [value, end];
}

function isSpace(c) {
  return c === 32 || c === 9 || c === 10 || c === 13;
}

function isNameChar(c) {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 36 || c === 95;
}

// Where the string literal opened by `quote` at `at` ends (a template's `${...}` is skipped
// as text, which is enough to step over the parentheses inside prompts).
function quoteEnd(source, at, quote, limit) {
  for (let j = at + 1; j < limit; j++) {
    const c = _apply(_charCodeAt, source, [j]);
    if (c === 92) j++;
    else if (c === quote) return j;
  }
  return limit;
}

// The engine marks a call at the last token it positioned inside it (`agent(x, {label: f})`
// is marked at `f`, possibly lines below). Walk back in the body's source to the hook's own
// name whose argument list encloses that mark; null when there is no such call nearby.
function callStart(source, mark, hook) {
  let from = mark + hook.length;
  for (let tries = 0; tries < 64; tries++) {
    const at = _apply(_lastIndexOf, source, [hook, from]);
    if (at < 0 || mark - at > 20000) return null;
    from = at - 1;
    // `subagent` is `agent` under another name
    const begin = hook === 'agent' && at >= 3 && _apply(_stringSlice, source, [at - 3, at]) === 'sub'
      ? at - 3 : at;
    if (begin > 0 && isNameChar(_apply(_charCodeAt, source, [begin - 1]))) continue;
    let i = at + hook.length;
    while (isSpace(_apply(_charCodeAt, source, [i]))) i++;
    if (_apply(_charCodeAt, source, [i]) !== 40) continue; // not followed by `(`
    if (mark < i) return begin; // the mark is on the name itself
    // the call's own argument list must still be open at the mark
    let depth = 0;
    let open = true;
    for (let j = i; j < mark && open; j++) {
      const c = _apply(_charCodeAt, source, [j]);
      if (c === 40) depth++;
      else if (c === 41 && --depth === 0) open = false;
      else if (c === 39 || c === 34 || c === 96) j = quoteEnd(source, j, c, mark);
    }
    if (open) return begin;
  }
  return null;
}

// `line`/`column` (1-based, the body's own) moved to the start of the hook call around them.
function refine(line, column, hook) {
  if (bodyFn === null || hook === null) return null;
  const source = _apply(_fnToString, bodyFn, []);
  const header = bodyHeaderChars - 1; // the source starts at `async function`, not at `(`
  let start = 0;
  for (let l = 1; l < line; l++) {
    start = _apply(_indexOf, source, ['\n', start]) + 1;
    if (start === 0) return null;
  }
  const mark = start + (line === 1 ? header : 0) + column - 1;
  const at = callStart(source, mark, hook);
  if (at === null) return null;
  const lineStart = _apply(_lastIndexOf, source, ['\n', at - 1]) + 1;
  let row = 1;
  for (let k = _apply(_indexOf, source, ['\n']); k >= 0 && k < at; k = _apply(_indexOf, source, ['\n', k + 1])) row++;
  return [row, at - lineStart + 1 - (row === 1 ? header : 0)];
}

const _hooks = _create(null);
_hooks.agent = 'agent';
_hooks.parallel = 'parallel';
_hooks.pipeline = 'pipeline';
_hooks.phase = 'phase';
_hooks.log = 'log';
_hooks.ask = 'ask';
_hooks.checkpoint = 'checkpoint';

function frameName(stack, at) {
  // `    at NAME (<input>:...` — the name before the position that starts at `at`
  const open = _apply(_lastIndexOf, stack, [' (', at]);
  const word = _apply(_lastIndexOf, stack, ['at ', open]);
  if (open < 0 || word < 0) return null;
  const name = _apply(_stringSlice, stack, [word + 3, open]);
  return _hooks[name] === undefined ? null : _hooks[name];
}

function scriptPosition(error) {
  if (typeof bodyLineOffset !== 'number' || typeof _stackGet !== 'function') return '';
  const stack = _apply(_stackGet, error, []);
  if (typeof stack !== 'string') return '';
  let from = 0;
  let hook = null;
  for (;;) {
    const at = _apply(_indexOf, stack, ['<input>:', from]);
    if (at < 0) return '';
    from = at + 8;
    const row = readNumber(stack, from);
    if (row === null || _apply(_charCodeAt, stack, [row[1]]) !== 58) continue;
    const col = readNumber(stack, row[1] + 1);
    if (col === null) continue;
    if (row[0] <= bodyLineOffset) {
      hook = frameName(stack, at);
      continue;
    }
    let line = row[0] - bodyLineOffset;
    let column = col[0];
    if (line === 1) column = column - bodyHeaderChars > 1 ? column - bodyHeaderChars : 1;
    const better = refine(line, column, hook);
    if (better !== null) {
      line = better[0];
      column = better[1];
    }
    return ' (line ' + line + ', column ' + column + ')';
  }
}

// A call's own stack, cut to the frames that can name it (this one, the hook, two callers):
// capturing ten frames per call would cost twice as much. The limit is set through the
// captured native accessor, so it works even when a script changed or removed its own.
const _limitAccess = _getOwnPropertyDescriptor(_Error, 'stackTraceLimit');
const _getLimit = _limitAccess !== undefined ? _limitAccess.get : undefined;
const _setLimit = _limitAccess !== undefined ? _limitAccess.set : undefined;

function callSite() {
  if (typeof _getLimit !== 'function' || typeof _setLimit !== 'function') return new _Error();
  const limit = _apply(_getLimit, _Error, []);
  _apply(_setLimit, _Error, [4]);
  const site = new _Error();
  _apply(_setLimit, _Error, [limit]);
  return site;
}

// Refusals the host makes for a call's own arguments; they name the call's position.
const misuse = _create(null);
misuse.INVALID_ARGUMENT = true;
misuse.UNSUPPORTED_OPTION = true;
misuse.UNSUPPORTED_SCHEMA = true;

// `site`: an Error captured at the offending call, when the error is made after it returned;
// null: the error names no position.
function makeError(code, message, site) {
  const e = new _Error(message);
  const where = site === null ? '' : scriptPosition(site === undefined ? e : site);
  if (where !== '') {
    message = message + where;
    _defineProperty(e, 'message', { value: message, writable: true, enumerable: false, configurable: true });
  }
  _defineProperty(e, 'name', { value: 'WorkflowError', writable: false, enumerable: false, configurable: false });
  _defineProperty(e, 'code', { value: code, writable: false, enumerable: true, configurable: false });
  _defineProperty(e, 'fatal', { value: true, writable: false, enumerable: true, configurable: false });
  _defineProperty(e, 'stack', { value: 'WorkflowError: ' + message, writable: false, enumerable: false, configurable: false });
  const record = _create(null);
  record.code = _String(code);
  record.message = _String(message);
  _apply(_weakMapSet, fatal, [e, record]);
  return e;
}

// A failed child of an agent(prompt, {failure: "throw"}) call: an ordinary (never fatal) error
// {name: "AgentFailure", kind, message, details} that parallel()/pipeline() turn into null.
function agentFailure(failure) {
  const e = new _Error(_String(failure.message));
  _apply(_weakMapSet, agentFailures, [e, failureBrief(failure)]);
  _defineProperty(e, 'name', { value: 'AgentFailure', writable: true, enumerable: false, configurable: true });
  _defineProperty(e, 'kind', { value: _String(failure.kind), writable: true, enumerable: true, configurable: true });
  _defineProperty(e, 'details', { value: failure.details, writable: true, enumerable: true, configurable: true });
  return e;
}

// AgentFailure errors the runtime made -> {kind, message} as made (what settle() reports).
const agentFailures = new _WeakMap();

// The {kind, message} of a failed child as the host sent it.
function failureBrief(failure) {
  const brief = _create(null);
  brief.kind = _String(failure.kind);
  brief.message = _String(failure.message);
  return brief;
}

function fatalRecord(e) {
  if (e === null || (typeof e !== 'object' && typeof e !== 'function')) return undefined;
  return _apply(_weakMapGet, fatal, [e]);
}

function isFatal(e) {
  return fatalRecord(e) !== undefined;
}

// ---- state shared with the host ------------------------------------------------------------

let outbox = '';
let result = null;
let started = false;
let nextId = 1;
// The combinator item (settle/vote/first) whose thunk is running synchronously, or null; an
// agent() call made then belongs to it (see newItem).
let currentItem = null;
let raceCount = 0;  // first() calls so far: the ordinal under which a race's winner is journaled
let pendingCount = 0;
let questionCount = 0;  // pending calls that are ask()/checkpoint() questions
let idleReported = false;  // ["idle", n] posted since the host last settled anything
const pending = _create(null);
let budgetTotal = null;  // tokens the run may spend; null: unlimited
let budgetSpent = 0;     // tokens the run's children have reported, as the host last said
let budgetTotalUsd = null;  // dollars the run may spend; null: unlimited
let budgetSpentUsd = 0;     // dollars the run's children have cost (known costs), as last said

function post(text) {
  outbox = outbox === '' ? text : outbox + ',' + text;
}

function setItem(array, index, value) {
  ITEM.value = value;
  _defineProperty(array, index, ITEM);
  ITEM.value = undefined;
}

// A waiter's resolve function, handed over by the one shared executor (no closure per call).
let capturedResolve = null;
function captureResolve(resolve) {
  capturedResolve = resolve;
}

// A hook call's waiter: a runtime promise whose resolve function is stored in `slot`.
function waiterFor(slot) {
  const waiter = own(new _Promise(captureResolve));
  slot.resolve = capturedResolve;
  capturedResolve = null;
  return waiter;
}

// ---- hooks ---------------------------------------------------------------------------------

const agent = async function agent(prompt, opts) {
  if (typeof prompt !== 'string' || prompt === '') {
    throw makeError('INVALID_ARGUMENT', 'agent() requires a non-empty prompt string as its first '
      + 'argument (got ' + describeKind(prompt) + ')');
  }
  if (prompt.length > maxPromptChars) {
    throw makeError('INVALID_ARGUMENT', 'agent() prompt is ' + prompt.length + ' characters — over '
      + 'the per-prompt cap (max_prompt_chars=' + maxPromptChars + '); shorten it or pass less data');
  }
  let optsText = 'null';
  if (opts !== undefined) {
    if (opts === null || typeof opts !== 'object' || _isArray(opts)) {
      throw makeError('INVALID_ARGUMENT', 'agent() options must be an object such as '
        + '{label, phase, schema, model, provider, effort, agentType, isolation, failure} (got '
        + describeKind(opts) + ')');
    }
    try {
      optsText = materialize(opts, 'options', maxDepth);
    } catch (e) {
      if (!isBoundaryError(e)) throw e;
      throw makeError('INVALID_ARGUMENT', 'agent() options must be plain JSON data — '
        + e.path + ': ' + e.reason);
    }
  }
  // A call made while a combinator item runs belongs to it; a first() loser starts no child.
  const item = currentItem;
  if (item !== null && itemCancelled(item)) {
    // A loser's code that still runs calls nothing: the call never returns (as one in flight
    // when the race was won), and a script that awaits nothing else ends as stalled.
    await own(new _Promise(function () {}));
  }
  const id = nextId++;
  const slot = _create(null);
  slot.done = false;
  // The host may refuse a call for its options; the call's position is only on this stack, so
  // keep it (a call without options is never refused for its arguments: no cost there).
  if (opts !== undefined) slot.site = callSite();
  const waiter = waiterFor(slot);
  // Everything that can fail (allocation) happens before the call is counted as pending.
  const message = '["agent",' + id + ',' + _stringify(prompt) + ',' + optsText + ']';
  post(message);
  pending[id] = slot;
  pendingCount++;
  if (item !== null) trackCall(item, id, true);
  await waiter;
  if (item !== null) trackCall(item, id, false);
  if (slot.ok === true) {
    if (slot.reason !== undefined && item !== null) noteFailure(item, slot.reason);
    return slot.value;
  }
  if (slot.failure !== undefined) {
    if (item !== null) noteFailure(item, slot.failure);
    throw agentFailure(slot.failure);
  }
  const code = _String(slot.code);
  throw makeError(code, _String(slot.message), misuse[code] === true && slot.site !== undefined ? slot.site : null);
};

// ---- ask() and checkpoint(): a question for a person (docs/scripts.md, "Asking a person") ---
//
// The host checks the options, journals the question and answers it (from its journal, its
// answerer, the store, or a timeout); a question takes no agent slot and costs nothing. When
// the script waits on nothing but questions, take() says so (["idle", n]) once, so a host with
// nobody to answer can park the run.

function question(hook, kind, text, opts, example) {
  if (typeof text !== 'string' || text === '') {
    throw makeError('INVALID_ARGUMENT', hook + '() requires a non-empty question string as its '
      + 'first argument (got ' + describeKind(text) + ')');
  }
  if (text.length > maxPromptChars) {
    throw makeError('INVALID_ARGUMENT', hook + '() question is ' + text.length + ' characters — '
      + 'over the per-prompt cap (max_prompt_chars=' + maxPromptChars + ')');
  }
  let optsText = 'null';
  if (opts !== undefined) {
    if (opts === null || typeof opts !== 'object' || _isArray(opts)) {
      throw makeError('INVALID_ARGUMENT', hook + '() options must be an object such as '
        + example + ' (got ' + describeKind(opts) + ')');
    }
    try {
      optsText = materialize(opts, 'options', maxDepth);
    } catch (e) {
      if (!isBoundaryError(e)) throw e;
      throw makeError('INVALID_ARGUMENT', hook + '() options must be plain JSON data — '
        + e.path + ': ' + e.reason);
    }
  }
  const id = nextId++;
  const slot = _create(null);
  slot.done = false;
  slot.question = true;
  if (opts !== undefined) slot.site = callSite();
  const waiter = waiterFor(slot);
  const message = '["ask",' + id + ',' + _stringify(kind) + ',' + _stringify(text) + ','
    + optsText + ']';
  post(message);
  pending[id] = slot;
  pendingCount++;
  questionCount++;
  slot.waiter = waiter;
  return slot;
}

function answered(slot) {
  if (slot.ok === true) return slot.value;
  const code = _String(slot.code);
  throw makeError(code, _String(slot.message), misuse[code] === true && slot.site !== undefined ? slot.site : null);
}

const ask = async function ask(text, opts) {
  const slot = question('ask', 'ask', text, opts,
    '{schema, choices, multiple, details, default, timeout, onTimeout, label, phase}');
  await slot.waiter;
  return answered(slot);
};

const checkpoint = async function checkpoint(title, opts) {
  const slot = question('checkpoint', 'checkpoint', title, opts,
    '{details, default, timeout, onReject}');
  await slot.waiter;
  return answered(slot);
};

// ---- workflow(): a saved workflow run inline (docs/embedding.md, "Saved workflows and `workflow()`") ---
//
// The host looks the workflow up in its library and answers with its (parse-checked) body; the
// body runs here as an async function of (args, workflow), so it shares this run's hooks, caps,
// budget, journal and events, sees its own `args`, and its `workflow` is one that refuses (one
// level of nesting only).

const _AsyncFunction = _getPrototypeOf(async function () {}).constructor;

const nestedWorkflow = function workflow() {
  throw makeError('UNSUPPORTED_OPTION', 'workflow() cannot be called inside a workflow that '
    + 'workflow() started: nesting is one level only');
};

// The `<target>,<args>` part of a workflow message (JSON texts), or a fatal misuse error.
function workflowRequest(target, args) {
  let targetText;
  if (typeof target === 'string' && target !== '') {
    targetText = _stringify(target);
  } else if (target !== null && typeof target === 'object' && !_isArray(target)) {
    const keys = _keys(target);
    const scriptPath = keys.length === 1 && keys[0] === 'scriptPath' ? target.scriptPath : undefined;
    if (typeof scriptPath !== 'string' || scriptPath === '') {
      throw makeError('INVALID_ARGUMENT', 'workflow() takes a saved workflow\'s name or '
        + '{scriptPath: "file.js"} (got an object with keys ' + _stringify(keys) + ')');
    }
    targetText = '{"scriptPath":' + _stringify(scriptPath) + '}';
  } else {
    throw makeError('INVALID_ARGUMENT', 'workflow() takes a saved workflow\'s name or '
      + '{scriptPath: "file.js"} as its first argument (got ' + describeKind(target) + ')');
  }
  let argsText = 'null';
  if (args !== undefined) {
    try {
      argsText = materialize(args, 'args', maxDepth);
    } catch (e) {
      if (!isBoundaryError(e)) throw e;
      throw makeError('INVALID_ARGUMENT', 'workflow() args must be plain JSON data — '
        + e.path + ': ' + e.reason);
    }
  }
  return targetText + ',' + argsText;
}

const workflow = async function workflow(target, args) {
  const request = workflowRequest(target, args);
  const id = nextId++;
  const slot = _create(null);
  slot.done = false;
  const waiter = waiterFor(slot);
  post('["workflow",' + id + ',' + request + ']');
  pending[id] = slot;
  pendingCount++;
  await waiter;
  if (slot.ok !== true) throw makeError(_String(slot.code), _String(slot.message));
  const found = slot.value;
  const name = _String(found.name);
  const nestedArgs = found.args === null ? undefined : found.args;
  let value;
  try {
    const body = new _AsyncFunction('args', 'workflow', found.body);
    value = await body(nestedArgs, nestedWorkflow);
  } catch (e) {
    if (isFatal(e)) throw e;
    throw makeError('AGENT_FAILED', 'workflow("' + name + '") failed: ' + renderBrief(e));
  }
  let text;
  try {
    text = jsonText(value, 'workflow("' + name + '") return value', maxDepth, runWarnings);
  } catch (e) {
    if (isScriptThrow(e)) {
      if (isFatal(e.error)) throw e.error;
      throw makeError('AGENT_FAILED', 'workflow("' + name + '") failed: ' + renderBrief(e.error)
        + ' (thrown while ' + e.path + ' was converted to JSON)');
    }
    if (!isBoundaryError(e)) throw e;
    throw makeError('RESULT_UNSERIALIZABLE', 'workflow("' + name + '") returned a value that is '
      + 'not plain JSON data — ' + e.path + ': ' + e.reason);
  }
  return text === undefined ? null : _parse(text);
};

function narrate(kind, text) {
  post('[' + _stringify(kind) + ',' + _stringify(text) + ']');
}

const phase = function phase(title) {
  if (typeof title !== 'string' || title === '') {
    throw makeError('INVALID_ARGUMENT', 'phase() requires a non-empty title string (got ' + describeKind(title) + ')');
  }
  narrate('phase', title.length > maxLogChars ? _apply(_stringSlice, title, [0, maxLogChars]) + '…' : title);
};

const log = function log(message) {
  if (typeof message !== 'string') {
    throw makeError('INVALID_ARGUMENT', 'log() requires a message string (got ' + describeKind(message)
      + '); build one with a template literal or JSON.stringify(value)');
  }
  narrate('log', message.length > maxLogChars
    ? _apply(_stringSlice, message, [0, maxLogChars]) + '… [truncated]' : message);
};

function formatConsoleArg(value) {
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object') {
    try {
      const text = materialize(value, 'value', maxDepth);
      if (text !== undefined) return text;
    } catch (_) {
      // not JSON data: fall back to its string form
    }
  }
  return renderValue(value);
}

function consoleMethod(name) {
  return function () {
    let text = '';
    for (let i = 0; i < arguments.length; i++) {
      text += (i === 0 ? '' : ' ') + formatConsoleArg(arguments[i]);
    }
    log(text);
  };
}

// One combinator call's join: `out` is filled in input order and `promise` resolves with it
// once every item is in, or rejects at the first fatal error. Resolving with the array looks up
// `then` on it, as any promise resolution does: a `then` a script put on Array.prototype runs
// there, which only affects that script.
let capturedReject = null;
function captureBoth(resolve, reject) {
  capturedResolve = resolve;
  capturedReject = reject;
}

function newJoin(count, stages, stageCount) {
  const join = _create(null);
  join.out = [];
  join.remaining = count;
  join.count = count;
  join.next = count;   // the next item to start once a running one ends ({concurrency})
  join.works = null;   // the items not started yet, by index ({concurrency})
  join.failed = false; // a fatal error rejected the join: start no more items
  join.stages = stages;  // pipeline(): the stage functions; parallel(): null
  join.stageCount = stageCount;
  join.promise = own(new _Promise(captureBoth));
  join.resolve = capturedResolve;
  join.reject = capturedReject;
  capturedResolve = capturedReject = null;
  if (count === 0) join.resolve(join.out);
  return join;
}

// One item of a combinator: parallel()'s thunk `work`, or pipeline()'s stages run on the item
// `work`; an ordinary throw makes the item null, a fatal one rejects the join. The item is put
// in two jobs after its value (or error) is known, the turn at which a then() on a per-item
// promise used to put it, so scripts see their callbacks in the same order as before.
//
// Out of memory is not an ordinary throw: an item that ran out of memory rejects the join as a
// fatal error does (the run is out of memory, not the item), and when the join's own
// bookkeeping fails (it runs no script code, so that is the engine running out of memory or
// stack) the barrier can no longer be kept and the run ends at once with that limit
// (bookkeepingFailed), instead of waiting forever on an item that will never be put.
async function runItem(join, index, work) {
  let value;
  try {
    const stages = join.stages;
    if (stages === null) {
      value = await work();
    } else {
      value = work;
      for (let s = 0; s < join.stageCount; s++) value = await stages[s](value, work, index);
    }
  } catch (e) {
    if (isFatal(e) || isOutOfMemory(e)) {
      try {
        join.failed = true;
        await undefined;
        join.reject(e);
      } catch (failure) {
        bookkeepingFailed(failure);
      }
      return;
    }
    value = null;
  }
  try {
    if (join.next < join.count && !join.failed) startNext(join);
    await undefined;
    setItem(join.out, index, value);
    join.remaining -= 1;
    if (join.remaining === 0) join.resolve(join.out);
  } catch (failure) {
    bookkeepingFailed(failure);
  }
}

// True for the engine's own out-of-memory error, or a bare null met while the heap is full.
function isOutOfMemory(e) {
  if (e === null) {
    noteNull();
    return nullWasOutOfMemory;
  }
  return limitKind(e) === 'MEMORY';
}

// The runtime's own code failed where no script code runs: end the run with the limit it hit.
function bookkeepingFailed(failure) {
  finish(limitKind(failure) === 'STACK' ? END_STACK : END_MEMORY);
}

// Starts a combinator's items: all of them, or the first `limit` (a {concurrency} option; 0:
// none), the rest one by one as running items end.
function startItems(join, works, limit) {
  const count = join.count;
  const first = limit === 0 || limit >= count ? count : limit;
  if (first < count) {
    join.works = works;
    join.next = first;
  }
  // settle()'s joins have their own runner; parallel()/pipeline() joins stay as they were (an
  // item that runs out of memory must leave the same frames and heap behind:
  // tests/adversarial/test_memory_verdicts.py), and runItem is called as a plain function.
  const run = join.runner === undefined ? runItem : join.runner;
  for (let i = 0; i < first; i++) run(join, i, works[i]);
}

function startNext(join) {
  const i = join.next++;
  const work = join.works[i];
  join.works[i] = undefined;
  const run = join.runner === undefined ? runItem : join.runner;
  run(join, i, work);
}

// The item limit of a parallel()/pipeline() options object (0: none given). Strict: an options
// value that is not a plain object, a key other than `concurrency` (whose value is not
// undefined) or a concurrency that is not a whole number >= 1 is fatal.
function concurrencyOption(hook, options) {
  if (options === undefined) return 0;
  if (options === null || typeof options !== 'object' || _isArray(options)) {
    throw makeError('INVALID_ARGUMENT', hook + ' options must be an object such as '
      + '{concurrency: 4} (got ' + describeKind(options) + ')');
  }
  const proto = _getPrototypeOf(options);
  if (proto !== _ObjectPrototype && proto !== null) {
    throw makeError('INVALID_ARGUMENT', hook + ' options must be a plain object such as '
      + '{concurrency: 4}');
  }
  const keys = _keys(options);
  for (let i = 0; i < keys.length; i++) {
    if (keys[i] !== 'concurrency' && options[keys[i]] !== undefined) {
      throw makeError('UNSUPPORTED_OPTION', hook + ' option ' + _stringify(keys[i])
        + ' is not recognized (supported: concurrency)');
    }
  }
  const n = options.concurrency;
  if (n === undefined) return 0;
  if (typeof n !== 'number' || !(n >= 1) || n % 1 !== 0 || n > 9007199254740991) {
    throw makeError('INVALID_ARGUMENT', hook + ' option concurrency must be a whole number of at '
      + 'least 1 (got ' + (typeof n === 'number' ? _String(n) : typeof n === 'string' && n.length <= 40
        ? 'the string ' + _stringify(n) : describeKind(n)) + '); leave it '
      + 'out to run every item at once (the engine\'s max_concurrent_agents still applies)');
  }
  return n;
}

// The item count of an array argument, read once (a Proxy may answer each read differently) and
// checked as that snapshot; everything after works on the snapshot.
function itemCount(hook, items) {
  const count = items.length;
  if (typeof count !== 'number' || !(count >= 0) || count % 1 !== 0) {
    throw makeError('INVALID_ARGUMENT', hook + ' received an array-like whose length is not an '
      + 'array length (got ' + describeKind(count) + ')');
  }
  if (count > maxItems) {
    throw makeError('ITEM_CAP', hook + ' received ' + count + ' items — over the per-call cap '
      + '(max_items_per_call=' + maxItems + '); split the work into smaller calls or raise '
      + 'max_items_per_call in the engine config');
  }
  return count;
}

function rejected(error) {
  return own(new _Promise(function (resolve, reject) { reject(error); }));
}

// parallel() and pipeline() are plain functions returning the join's promise itself: an async
// function would resolve its result through the script-visible Promise.prototype.then.
const parallel = function parallel(thunks, options) {
  try {
    if (isRevoked(thunks) || !_ArrayIsArray(thunks)) {
      throw makeError('INVALID_ARGUMENT', 'parallel() requires an array of zero-argument functions, '
        + 'e.g. parallel(items.map(x => () => agent(...))) (got ' + describeKind(thunks) + ')');
    }
    const count = itemCount('parallel()', thunks);
    const fns = _create(null);
    for (let i = 0; i < count; i++) {
      const fn = thunks[i];
      if (typeof fn !== 'function' || isRevoked(fn)) {
        throw makeError('INVALID_ARGUMENT', 'parallel() item ' + i + ' is not a function (got '
          + describeKind(fn) + '); wrap each task as () => agent(...)');
      }
      fns[i] = fn;
    }
    const limit = concurrencyOption('parallel()', options);
    const join = newJoin(count, null, 0);
    startItems(join, fns, limit);
    return join.promise;
  } catch (e) {
    return rejected(e);
  }
};

const pipeline = function pipeline(items) {
  try {
    if (isRevoked(items) || !_ArrayIsArray(items)) {
      throw makeError('INVALID_ARGUMENT', 'pipeline() requires an items array as its first argument (got '
        + describeKind(items) + ')');
    }
    const count = itemCount('pipeline()', items);
    let stageCount = arguments.length - 1;
    // A last argument that is an object (not a function, an array or null) is the options; a
    // last undefined after a stage is options left out, as for parallel(thunks, undefined).
    let limit = 0;
    const last = arguments[arguments.length - 1];
    if (stageCount >= 1 && last !== null && typeof last === 'object' && !_isArray(last)) {
      limit = concurrencyOption('pipeline()', last);
      stageCount--;
    } else if (stageCount >= 2 && last === undefined) {
      stageCount--;
    }
    if (stageCount < 1) {
      throw makeError('INVALID_ARGUMENT', 'pipeline() requires at least one stage function after the '
        + 'items array: pipeline(items, (prev, item, index) => ..., {concurrency}?)');
    }
    const stages = _create(null);
    for (let s = 0; s < stageCount; s++) {
      const stage = arguments[s + 1];
      if (typeof stage !== 'function' || isRevoked(stage)) {
        throw makeError('INVALID_ARGUMENT', 'pipeline() stage ' + s + ' is not a function (got '
          + describeKind(stage) + ')');
      }
      stages[s] = stage;
    }
    const values = _create(null);
    for (let i = 0; i < count; i++) values[i] = items[i];
    const join = newJoin(count, stages, stageCount);
    startItems(join, values, limit);
    return join.promise;
  } catch (e) {
    return rejected(e);
  }
};

// ---- failure-aware combinators: settle(), vote(), first(), gate() -------------------------
//
// An item is one thunk of settle()/vote()/first(). The agent() calls its thunk makes while it
// runs synchronously (up to its first await, which is where `() => agent(...)` and an async
// thunk's first call are made) belong to it, and to the item it was started in: the item learns
// why such a call's child failed (the host sends the reason beside a failed child's null), and
// first() can cancel the calls of a loser. A call made after an await belongs to no item.

function newItem(parent) {
  const item = _create(null);
  item.parent = parent;
  item.cancelled = false;
  item.failure = null;  // {kind, message} of the last failed child of its calls
  item.calls = _create(null);  // ids of its calls still waiting for their answer
  return item;
}

function itemCancelled(item) {
  for (let at = item; at !== null; at = at.parent) if (at.cancelled) return true;
  return false;
}

function trackCall(item, id, open) {
  for (let at = item; at !== null; at = at.parent) {
    if (open) at.calls[id] = true;
    else delete at.calls[id];
  }
}

function noteFailure(item, failure) {
  const brief = failureBrief(failure);
  for (let at = item; at !== null; at = at.parent) at.failure = brief;
}

// Calls work() as `item`: the calls it makes synchronously belong to the item.
function callAs(item, work) {
  const saved = currentItem;
  currentItem = item;
  try {
    return work();
  } finally {
    currentItem = saved;
  }
}

// settle()'s record of a thunk that returned `value`: a null (or undefined) value from a thunk
// whose child failed is that child's failure.
function settledValue(item, value) {
  if ((value === null || value === undefined) && item.failure !== null) {
    return { ok: false, error: { kind: item.failure.kind, message: item.failure.message } };
  }
  return { ok: true, value: value === undefined ? null : value };
}

// settle()'s record of an ordinary throw: an AgentFailure keeps its kind; anything else is
// kind "thrown" with its message (and its string `code`, when it has one).
function settledError(e) {
  const known = e !== null && typeof e === 'object' ? _apply(_weakMapGet, agentFailures, [e]) : undefined;
  if (known !== undefined) return { ok: false, error: { kind: known.kind, message: known.message } };
  let message;
  let code;
  if (e !== null && typeof e === 'object' && !isRevoked(e)) {
    try {
      message = e.message;
      code = e.code;
    } catch (_) {
      message = undefined;
      code = undefined;
    }
  }
  const text = typeof message === 'string' ? message : typeof e === 'string' ? e : renderBrief(e);
  return {
    ok: false,
    error: typeof code === 'string'
      ? { kind: 'thrown', message: text, code: code } : { kind: 'thrown', message: text },
  };
}

// One item of settle(): as runItem, but the item's slot is its record (never a rejection for
// an ordinary throw), and its calls belong to it.
async function runSettled(join, index, work) {
  const item = newItem(join.parentItem);
  let value;
  try {
    value = settledValue(item, await callAs(item, work));
  } catch (e) {
    if (isFatal(e) || isOutOfMemory(e)) {
      try {
        join.failed = true;
        await undefined;
        join.reject(e);
      } catch (failure) {
        bookkeepingFailed(failure);
      }
      return;
    }
    value = settledError(e);
  }
  try {
    if (join.next < join.count && !join.failed) startNext(join);
    await undefined;
    setItem(join.out, index, value);
    join.remaining -= 1;
    if (join.remaining === 0) join.resolve(join.out);
  } catch (failure) {
    bookkeepingFailed(failure);
  }
}

// The functions of a thunks array, checked as parallel() checks them (a snapshot by index).
function thunkList(hook, thunks) {
  if (isRevoked(thunks) || !_ArrayIsArray(thunks)) {
    throw makeError('INVALID_ARGUMENT', hook + ' requires an array of zero-argument functions, '
      + 'e.g. ' + _apply(_stringSlice, hook, [0, -1]) + 'items.map(x => () => agent(...))) (got '
      + describeKind(thunks) + ')');
  }
  const count = itemCount(hook, thunks);
  const fns = _create(null);
  for (let i = 0; i < count; i++) {
    const fn = thunks[i];
    if (typeof fn !== 'function' || isRevoked(fn)) {
      throw makeError('INVALID_ARGUMENT', hook + ' item ' + i + ' is not a function (got '
        + describeKind(fn) + '); wrap each task as () => agent(...)');
    }
    fns[i] = fn;
  }
  fns.length = count;
  return fns;
}

function settleJoin(fns, limit) {
  const join = newJoin(fns.length, null, 0);
  join.runner = runSettled;  // startItems runs settle()'s items with it
  join.parentItem = currentItem;  // the item this settle() call belongs to
  startItems(join, fns, limit);
  return join.promise;
}

const settle = function settle(thunks, options) {
  try {
    const fns = thunkList('settle()', thunks);
    return settleJoin(fns, concurrencyOption('settle()', options));
  } catch (e) {
    return rejected(e);
  }
};

// An options object of vote()/first()/gate(): a plain object whose keys are all `allowed`
// (a key whose value is undefined counts as absent).
function optionsOf(hook, options, allowed, example) {
  if (options === undefined) return _create(null);
  if (options === null || typeof options !== 'object' || _isArray(options)) {
    throw makeError('INVALID_ARGUMENT', hook + ' options must be an object such as ' + example
      + ' (got ' + describeKind(options) + ')');
  }
  const proto = _getPrototypeOf(options);
  if (proto !== _ObjectPrototype && proto !== null) {
    throw makeError('INVALID_ARGUMENT', hook + ' options must be a plain object such as ' + example);
  }
  const read = _create(null);
  const keys = _keys(options);
  for (let i = 0; i < keys.length; i++) {
    const value = options[keys[i]];
    if (value === undefined) continue;
    let known = false;
    let names = '';
    for (let k = 0; k < allowed.length; k++) {
      if (allowed[k] === keys[i]) known = true;
      names = names + (k === 0 ? '' : ', ') + allowed[k];
    }
    if (!known) {
      throw makeError('UNSUPPORTED_OPTION', hook + ' option ' + _stringify(keys[i])
        + ' is not recognized (supported: ' + names + ')');
    }
    read[keys[i]] = value;
  }
  return read;
}

function wholeNumber(value, least) {
  return typeof value === 'number' && value >= least && value % 1 === 0 && value <= 9007199254740991;
}

function functionOption(hook, name, value) {
  if (value !== undefined && (typeof value !== 'function' || isRevoked(value))) {
    throw makeError('INVALID_ARGUMENT', hook + ' option ' + name + ' must be a function (got '
      + describeKind(value) + ')');
  }
  return value === undefined ? null : value;
}

const VOTE_FAILED = ['abstain', 'against', 'for'];

const vote = async function vote(n, fn, options) {
  if (!wholeNumber(n, 1)) {
    throw makeError('INVALID_ARGUMENT', 'vote() requires a whole number of voters (at least 1) as '
      + 'its first argument (got ' + describeKind(n) + ')');
  }
  if (n > maxItems) {
    throw makeError('ITEM_CAP', 'vote() received ' + n + ' voters — over the per-call cap '
      + '(max_items_per_call=' + maxItems + '); use fewer voters or raise max_items_per_call');
  }
  if (typeof fn !== 'function' || isRevoked(fn)) {
    throw makeError('INVALID_ARGUMENT', 'vote() requires a function (i) => ... as its second '
      + 'argument (got ' + describeKind(fn) + ')');
  }
  const example = '{pass: v => v.approve, quorum, failed: "abstain"}';
  const opts = optionsOf('vote()', options, ['pass', 'quorum', 'failed'], example);
  const pass = functionOption('vote()', 'pass', opts.pass);
  if (pass === null) {
    throw makeError('INVALID_ARGUMENT', 'vote() requires options.pass, a function that judges '
      + 'each voter\'s value: ' + example);
  }
  const quorum = opts.quorum === undefined ? (n - n % 2) / 2 + 1 : opts.quorum;
  if (!wholeNumber(quorum, 1) || quorum > n) {
    throw makeError('INVALID_ARGUMENT', 'vote() option quorum must be a whole number from 1 to '
      + 'the number of voters (' + n + ') (got ' + describeKind(opts.quorum) + ')');
  }
  const failedAs = opts.failed === undefined ? 'abstain' : opts.failed;
  let knownMode = false;
  for (let k = 0; k < VOTE_FAILED.length; k++) if (VOTE_FAILED[k] === failedAs) knownMode = true;
  if (!knownMode) {
    throw makeError('INVALID_ARGUMENT', 'vote() option failed must be "abstain", "against" or '
      + '"for" (got ' + describeKind(failedAs) + ')');
  }
  const fns = _create(null);
  for (let i = 0; i < n; i++) fns[i] = function () { return fn(i); };
  fns.length = n;
  const records = await settleJoin(fns, 0);
  const tally = { passed: false, for: 0, against: 0, abstained: 0, votes: [] };
  for (let i = 0; i < n; i++) {
    const record = records[i];
    let entry;
    if (record.ok && record.value !== null) {
      try {
        entry = { vote: (await pass(record.value, i)) ? 'for' : 'against', value: record.value };
      } catch (e) {
        if (isFatal(e) || isOutOfMemory(e)) throw e;
        entry = { vote: failedAs, value: record.value, error: settledError(e).error };
      }
    } else {
      entry = {
        vote: failedAs,
        value: null,
        error: record.ok ? { kind: 'null', message: 'the voter returned null' } : record.error,
      };
    }
    if (entry.vote === 'for') tally.for += 1;
    else if (entry.vote === 'against') tally.against += 1;
    else tally.abstained += 1;
    setItem(tally.votes, i, entry);
  }
  tally.passed = tally.for >= quorum;
  return tally;
};

// first(): the race's journaled winner in a durable run (its index), or -1: race live.
function recordedWinner(ordinal, count) {
  const state = numberStates.race;
  if (state === undefined) return -1;
  const value = ordinal <= state.count ? state.values[ordinal - 1] : null;
  return wholeNumber(value, 0) && value < count ? value : -1;
}

// The winner is known: every other item still running is cancelled (their calls in flight end
// as cancelled children on the host and never return to the loser's code; calls it would still
// make start no child), and in a durable run the winner is journaled. Posted before first() resolves, so the host serves it
// before the script's next call.
function raceWon(race, winner) {
  race.done = true;
  let ids = '';
  for (let i = 0; i < race.count; i++) {
    const item = race.items[i];
    if (i === winner || item === null) continue;
    item.cancelled = true;
    const open = _keys(item.calls);
    for (let k = 0; k < open.length; k++) ids = ids === '' ? open[k] : ids + ',' + open[k];
  }
  if (ids !== '') post('["cancel",' + '[' + ids + ']]');
  if (winner >= 0 && numberStates.race !== undefined) {
    post('["numbers","race",' + race.ordinal + ',[' + winner + ']]');
  }
}

async function runRacer(race, index, work) {
  const item = newItem(race.parentItem);
  race.items[index] = item;
  let value;
  let passed = true;
  try {
    value = await callAs(item, work);
    const until = race.until;
    if (!race.done && value !== null && value !== undefined && until !== null) {
      // until's own calls belong to the item too: cancelled with it if another thunk wins
      passed = !!(await callAs(item, function () { return until(value); }));
    }
  } catch (e) {
    if (race.done) return;
    if (isFatal(e) || isOutOfMemory(e)) {
      raceWon(race, -1);
      race.reject(e);
      return;
    }
    race.lastError = e;
    value = null;
    passed = null;  // threw: lastError holds what
  }
  if (passed !== null && (value === null || value === undefined || !passed)) {
    if (race.throws && !race.done) race.lastError = lostError(item, index, passed ? value : undefined);
    value = null;
  }
  if (race.done) return;
  race.items[index] = null;
  if (value !== null && value !== undefined) {
    raceWon(race, index);
    race.resolve(value);
    return;
  }
  race.remaining -= 1;
  if (race.remaining === 0) {
    if (race.fallback !== null) {
      const rest = race.fallback;
      race.fallback = null;
      startRacers(race, rest);
      return;
    }
    race.done = true;
    if (race.throws) race.reject(race.lastError);
    else race.resolve(null);
  }
}

// first()'s error for a thunk that gave no winning value (failure: "throw"): its failed
// child's AgentFailure, else what it gave.
function lostError(item, index, value) {
  if (item.failure !== null) {
    return agentFailure({ kind: item.failure.kind, message: item.failure.message, details: [] });
  }
  return new _Error('first(): thunk ' + index + (value === undefined
    ? '\'s value did not pass until' : ' gave ' + (value === null ? 'null' : 'undefined')));
}

function startRacers(race, indices) {
  race.remaining = indices.length;
  for (let k = 0; k < indices.length; k++) runRacer(race, indices[k], race.fns[indices[k]]);
}

const first = function first(thunks, options) {
  try {
    const fns = thunkList('first()', thunks);
    const opts = optionsOf('first()', options, ['until', 'failure'], '{until: v => v.confident}');
    if (opts.failure !== undefined && opts.failure !== 'null' && opts.failure !== 'throw') {
      throw makeError('INVALID_ARGUMENT', 'first() option failure must be "null" or "throw" (got '
        + describeKind(opts.failure) + ')');
    }
    const race = _create(null);
    race.until = functionOption('first()', 'until', opts.until);
    race.throws = opts.failure === 'throw';
    race.lastError = null;
    race.ordinal = ++raceCount;
    race.fns = fns;
    race.count = fns.length;
    race.items = _create(null);
    race.done = false;
    race.fallback = null;
    race.parentItem = currentItem;
    race.promise = own(new _Promise(captureBoth));
    race.resolve = capturedResolve;
    race.reject = capturedReject;
    capturedResolve = capturedReject = null;
    const count = fns.length;
    for (let i = 0; i < count; i++) race.items[i] = null;
    if (count === 0) {
      race.resolve(null);
      return race.promise;
    }
    const all = [];
    for (let i = 0; i < count; i++) setItem(all, i, i);
    const winner = recordedWinner(race.ordinal, count);
    if (winner >= 0) {
      // A resumed run: the journaled winner alone runs (its calls replay); the others run
      // only if it no longer wins.
      const rest = [];
      for (let i = 0; i < count; i++) if (i !== winner) setItem(rest, rest.length, i);
      race.fallback = rest.length > 0 ? rest : null;
      startRacers(race, [winner]);
    } else {
      startRacers(race, all);
    }
    return race.promise;
  } catch (e) {
    return rejected(e);
  }
};

const gate = async function gate(make, check, options) {
  if (typeof make !== 'function' || isRevoked(make)) {
    throw makeError('INVALID_ARGUMENT', 'gate() requires make(feedback, attempt) as its first '
      + 'argument (got ' + describeKind(make) + ')');
  }
  if (typeof check !== 'function' || isRevoked(check)) {
    throw makeError('INVALID_ARGUMENT', 'gate() requires check(value) as its second argument '
      + '(got ' + describeKind(check) + ')');
  }
  const opts = optionsOf('gate()', options, ['attempts'], '{attempts: 3}');
  const attempts = opts.attempts;
  if (!wholeNumber(attempts, 1) || attempts > maxItems) {
    throw makeError('INVALID_ARGUMENT', 'gate() requires options.attempts, a whole number from 1 '
      + 'to max_items_per_call=' + maxItems + ' (got ' + describeKind(attempts) + ')');
  }
  let value = null;
  let feedback;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    value = await make(feedback, attempt);
    const verdict = await check(value);
    const ok = verdict !== null && typeof verdict === 'object' ? verdict.ok : verdict;
    feedback = verdict !== null && typeof verdict === 'object' ? verdict.feedback : undefined;
    if (ok) return { ok: true, value: value, attempts: attempt, feedback: feedback === undefined ? null : feedback };
  }
  return { ok: false, value: value, attempts: attempts, feedback: feedback === undefined ? null : feedback };
};

// The `budget` global: the run's token and dollar ceilings as the host enforces them (the host
// refuses every
// agent() call once it is reached; these functions only let the script see it coming).
const budgetSpentFn = function spent() { return budgetSpent; };
const budgetSpentUsdFn = function spentUsd() { return budgetSpentUsd; };
const budgetRemainingFn = function remaining() {
  if (budgetTotal === null) return Infinity;
  return budgetTotal > budgetSpent ? budgetTotal - budgetSpent : 0;
};

function makeBudget() {
  const b = _create(_ObjectPrototype);
  _defineProperty(b, 'total', { value: budgetTotal, enumerable: true });
  _defineProperty(b, 'spent', { value: budgetSpentFn, enumerable: true });
  _defineProperty(b, 'remaining', { value: budgetRemainingFn, enumerable: true });
  _defineProperty(b, 'totalUsd', { value: budgetTotalUsd, enumerable: true });
  _defineProperty(b, 'spentUsd', { value: budgetSpentUsdFn, enumerable: true });
  return _freeze(b);
}

// ---- globals -------------------------------------------------------------------------------

function defineGlobal(name, value) {
  _defineProperty(globalThis, name, { value: value, writable: true, enumerable: false, configurable: true });
}

for (const fn of [agent, phase, log, parallel, pipeline, settle, vote, first, gate,
  budgetSpentFn, budgetRemainingFn,
  budgetSpentUsdFn,
  workflow, nestedWorkflow, ask, checkpoint]) _freeze(fn);
defineGlobal('agent', agent);
defineGlobal('subagent', agent);
defineGlobal('workflow', workflow);
defineGlobal('parallel', parallel);
defineGlobal('pipeline', pipeline);
defineGlobal('settle', settle);
defineGlobal('vote', vote);
defineGlobal('first', first);
defineGlobal('gate', gate);
defineGlobal('ask', ask);
defineGlobal('checkpoint', checkpoint);
defineGlobal('phase', phase);
defineGlobal('log', log);
defineGlobal('console', _freeze({
  log: _freeze(consoleMethod('log')),
  info: _freeze(consoleMethod('info')),
  warn: _freeze(consoleMethod('warn')),
  error: _freeze(consoleMethod('error')),
  debug: _freeze(consoleMethod('debug')),
}));
defineGlobal('args', undefined);
defineGlobal('budget', makeBudget());
// One clock: QuickJS's own `performance` reads the host's clock unjournaled (and shows it in
// timeOrigin), so it is absent; Date is the script's one clock.
for (const name of ['WeakRef', 'FinalizationRegistry', 'Atomics', 'SharedArrayBuffer',
  'performance']) {
  delete globalThis[name];
}

// ---- replayable clock and randomness (durable runs) ----------------------------------------
//
// In a run with a store, Date.now(), new Date() without arguments, Date() and Math.random()
// hand out values the host journals, and a resumed run gets the recorded values back in the
// same order until they run out (then live ones). Without a store nothing here is installed.

const _Date = Date;
const _dateNow = Date.now;
const _dateToString = Date.prototype.toString;
const _mathRandom = Math.random;
const NUMBER_KINDS = ['clock', 'random'];
//: Most values of one kind a run journals; later ones are live and not recorded.
const MAX_RECORDED_NUMBERS = 100000;
const numberStates = _create(null);

function nextNumber(kind, live) {
  const state = numberStates[kind];
  const value = state.next < state.count ? state.values[state.next] : live();
  state.next += 1;
  if (state.next <= MAX_RECORDED_NUMBERS) {
    if (state.fresh === '') state.first = state.next;
    state.fresh = state.fresh === '' ? _stringify(value) : state.fresh + ',' + _stringify(value);
  }
  return value;
}

function liveNow() { return _apply(_dateNow, _Date, []); }
function liveRandom() { return _apply(_mathRandom, Math, []); }

function installReplayableNumbers(recorded) {
  for (let k = 0; k < NUMBER_KINDS.length; k++) {
    const kind = NUMBER_KINDS[k];
    const values = recorded[kind];
    const state = _create(null);
    state.values = _isArray(values) ? values : [];
    state.count = state.values.length;
    state.next = 0;
    state.first = 1;
    state.fresh = '';
    numberStates[kind] = state;
  }
  // first()'s journaled winners: values[ordinal - 1] is race `ordinal`'s winner (null: none).
  const race = _create(null);
  race.values = _isArray(recorded.race) ? recorded.race : [];
  race.count = race.values.length;
  numberStates.race = race;
  const now = function now() { return nextNumber('clock', liveNow); };
  const DateWrapper = function Date(year, monthIndex, day, hours, minutes, seconds, ms) {
    if (new.target === undefined) {
      return _apply(_dateToString, _construct(_Date, [now()]), []);
    }
    return _construct(_Date, arguments.length === 0 ? [now()] : arguments, new.target);
  };
  _defineProperty(DateWrapper, 'prototype', { value: _Date.prototype, writable: false });
  _defineProperty(DateWrapper, 'now', { value: now, writable: true, configurable: true });
  _defineProperty(DateWrapper, 'parse', { value: _Date.parse, writable: true, configurable: true });
  _defineProperty(DateWrapper, 'UTC', { value: _Date.UTC, writable: true, configurable: true });
  _defineProperty(_Date.prototype, 'constructor', { value: DateWrapper, writable: true, configurable: true });
  defineGlobal('Date', DateWrapper);
  _defineProperty(Math, 'random', {
    value: function random() { return nextNumber('random', liveRandom); },
    writable: true, enumerable: false, configurable: true,
  });
}

// The values handed out since the last take, as one outbox message per kind.
function postNumbers() {
  for (let k = 0; k < NUMBER_KINDS.length; k++) {
    const state = numberStates[NUMBER_KINDS[k]];
    if (state === undefined || state.fresh === '') continue;
    post('["numbers",' + _stringify(NUMBER_KINDS[k]) + ',' + state.first + ',[' + state.fresh + ']]');
    state.fresh = '';
  }
}

// ---- host API ------------------------------------------------------------------------------

// Long concatenations are rope strings in QuickJS-ng, which the binding cannot hand to Python;
// slicing yields a flat copy.
function flat(text) {
  return _apply(_stringSlice, text, [0]);
}

function finish(text) {
  if (result === null) result = text;
}

// The fallback end record, built before any script code runs: recording it allocates nothing.
// The host turns it into a fixed text (or a memory verdict when the heap is full).
const END_UNRENDERABLE = '{"ok":false,"code":"UNRENDERABLE","error":""}';
const END_MEMORY = '{"ok":false,"code":"MEMORY","error":""}';
const END_STACK = '{"ok":false,"code":"STACK","error":""}';
let bodySettled = false;
// What the body threw, as its own catch saw it (see run_header in _script.py): with a full heap
// the engine can lose the value on the way out of the body and reject with a bare null instead.
let bodyThrew = null;
// Set once the body's catch ran: the body is over (the catch only rethrows), even if a full heap
// loses the rejection on its way to onThrow.
let bodyCaught = false;
// Set when the body threw a bare null while the heap had no room for a probe: QuickJS's
// out-of-memory that could not even allocate its error, seen before the body's variables
// released their memory.
let nullWasOutOfMemory = false;
const PROBE_CHARS = config.heapEvidenceBytes;

// True when the heap has no room for PROBE_CHARS more characters. Never throws.
function heapIsFull() {
  try {
    _apply(_stringRepeat, 'x', [PROBE_CHARS]);
    return false;
  } catch (_) {
    return true;
  }
}

// A bare null was caught where the memory that failed may still be held: probe now.
function noteNull() {
  if (!nullWasOutOfMemory && heapIsFull()) nullWasOutOfMemory = true;
}

// Called by the body's own catch with what it threw. Allocates nothing unless it probes.
function heapProbe(thrown) {
  bodyThrew = thrown;
  bodyCaught = true;
  if (thrown === null) noteNull();
}

function onReturn(value) {
  if (bodySettled) return;
  bodySettled = true;
  let text;
  try {
    text = jsonText(value, 'return value', maxDepth, runWarnings);
  } catch (e) {
    if (isScriptThrow(e)) {
      record(e.error, e.path);
      return;
    }
    if (isBoundaryError(e)) {
      try {
        finish('{"ok":false,"code":"RESULT_UNSERIALIZABLE","error":' + _stringify(
          "the workflow's return value is not plain JSON data — " + e.path + ': ' + e.reason
          + '. Return only JSON objects, arrays, strings, finite numbers, booleans and null.') + '}');
      } catch (_) {
        finish(END_UNRENDERABLE);
      }
      return;
    }
    record(e);
    return;
  }
  try {
    const warnings = warningsText(runWarnings);
    finish('{"ok":true,"value":' + (text === undefined ? 'null' : text)
      + (warnings === '' ? '' : ',"warnings":' + warnings) + '}');
  } catch (e) {
    record(e);
  }
}

function onThrow(e) {
  if (bodySettled) return;
  bodySettled = true;
  record(e);
}

// `where`: the path whose conversion to JSON ran the script code that threw (a getter, toJSON),
// or undefined. Rendering what the script threw runs script code only under try (textOf,
// quietRead), so a failure escaping thrownRecord is the runtime's own code failing: out of
// memory (the engine's error, or a bare null it could not even allocate) or stack ends the run
// with that limit; the fixed unrenderable text is left for anything else.
function record(e, where) {
  try {
    finish(thrownRecord(e, where));
  } catch (failure) {
    const kind = failure === null ? 'MEMORY' : limitKind(failure);
    finish(kind === 'MEMORY' ? END_MEMORY : kind === 'STACK' ? END_STACK : END_UNRENDERABLE);
  }
}

// The end record of a thrown value the engine could not deliver to onThrow: decided without
// running script code (limitKind reads no accessor), with a fixed text otherwise.
function lostRecord(e) {
  if (e === null) {
    return nullWasOutOfMemory ? '{"ok":false,"code":"MEMORY","error":""}'
      : '{"ok":false,"code":"THROWN_NOTHING","error":"null"}';
  }
  const kind = limitKind(e);
  if (kind !== null) return '{"ok":false,"code":"' + kind + '","error":""}';
  return '{"ok":false,"code":"MEMORY_IF_FULL","thrown":true,"error":"the script threw an error '
    + 'that the engine could not deliver (its heap was full)"}';
}

// The end record of a thrown value: {"ok":false, thrown:true, code, error, stack?}. `code` is a fatal
// error's code, a limit kind (MEMORY, STACK, INTERRUPTED: an engine-made error, see limitKind;
// the host confirms INTERRUPTED with the CPU time it measured), THROWN_NOTHING for null and
// undefined and MEMORY_IF_FULL for a bare null met while rendering (the host looks at the heap
// for both), or null. A thrown non-Error is named as such.
function thrownRecord(e, where) {
  const fatalError = fatalRecord(e);
  if (fatalError !== undefined) {
    return '{"ok":false,"code":' + _stringify(fatalError.code) + ',"error":'
      + _stringify(fatalError.message) + '}';
  }
  if (e === null && nullWasOutOfMemory) return '{"ok":false,"code":"MEMORY","error":""}';
  if (e === null && bodyThrew !== null) e = bodyThrew;  // lost on the way out: use what was thrown
  if (e === null || e === undefined) {
    return '{"ok":false,"code":"THROWN_NOTHING","error":"' + (e === null ? 'null' : 'undefined') + '"}';
  }
  let kind = limitKind(e);
  renderLimit = null;
  const t = typeof e;
  let head;
  let stack = '';
  if (t === 'object' && !isRevoked(e)) {
    const parts = renderParts(e);
    head = _isError(e) ? parts.head : 'the script threw ' + describeKind(e) + ', not an Error: ' + parts.head;
    stack = parts.stack;
  } else if (t === 'string') {
    head = 'the script threw a string, not an Error: ' + _stringify(e);
  } else if (t === 'object' || t === 'function') {
    head = 'the script threw ' + describeKind(e) + ', not an Error';
  } else {
    head = 'the script threw ' + describeKind(e) + ', not an Error: ' + textOf(e, UNRENDERABLE);
  }
  // Rendering ran the script's own code (toString, getters): a limit it hit there is the
  // run's verdict; a bare null there is out of memory only if the host finds the heap full.
  if (kind === null && renderLimit !== null) kind = renderLimit === 'NULL' ? 'MEMORY_IF_FULL' : renderLimit;
  if (where !== undefined) head = head + ' (thrown while ' + where + ' was converted to JSON)';
  return '{"ok":false,"thrown":true,"code":' + (kind === null ? 'null' : _stringify(kind)) + ',"error":'
    + _stringify(head) + (stack === '' ? '' : ',"stack":' + _stringify(stack)) + '}';
}

return {
  args: function setArgs(text) {
    if (!started) defineGlobal('args', _parse(text));
  },
  budget: function setBudget(total, totalUsd) {
    if (started) return;
    budgetTotal = total === undefined ? null : total;
    budgetTotalUsd = totalUsd === undefined ? null : totalUsd;
    defineGlobal('budget', makeBudget());
  },
  numbers: function setNumbers(text) {
    if (started || numberStates.clock !== undefined) return;
    installReplayableNumbers(_parse(text));
  },
  start: function start(body) {
    if (started) return;
    started = true;
    bodyFn = body;
    let promise;
    try {
      promise = body();
    } catch (e) {
      onThrow(e);
      return;
    }
    // A handler that failed anyway (it cannot, short of the engine itself failing) still
    // ends the run: its derived promise rejects into the fixed record.
    const ended = _apply(_then, promise, [onReturn, onThrow]);
    _apply(_then, ended, [undefined, function () { finish(END_UNRENDERABLE); }]);
  },
  // take() and result() answer '' for "nothing": the binding hands Python None when it cannot
  // allocate the copy of a string (the heap is full), and the host must tell that apart.
  take: function take() {
    if (numberStates.clock !== undefined) postNumbers();
    if (!idleReported && result === null && pendingCount > 0 && pendingCount === questionCount) {
      idleReported = true;
      post('["idle",' + questionCount + ']');
    }
    if (outbox === '') return '';
    const text = flat('[' + outbox + ']');
    outbox = '';
    return text;
  },
  settle: function settle(text) {
    const batch = _parse(text);
    idleReported = false;
    for (let i = 0; i < batch.length; i++) {
      const entry = batch[i];
      if (entry[0] === 'spent') {
        budgetSpent = entry[1];
        if (entry.length > 2) budgetSpentUsd = entry[2];
        continue;
      }
      const slot = pending[entry[0]];
      if (slot === undefined || slot.done) continue;
      slot.done = true;
      delete pending[entry[0]];
      pendingCount--;
      if (slot.question === true) questionCount--;
      // A call of first()'s loser never returns: the loser's code stops where it waits.
      if (slot.item !== undefined && slot.item !== null && itemCancelled(slot.item)) continue;
      if (entry[1] === true) {
        slot.ok = true;
        slot.value = entry[2];
        if (entry.length > 3) slot.reason = entry[3];
      } else if (entry[2] === 'AgentFailure') {
        slot.ok = false;
        slot.failure = entry[4];
      } else {
        slot.ok = false;
        slot.code = entry[2];
        slot.message = entry[3];
      }
      slot.resolve(undefined);
    }
  },
  result: function getResult() {
    if (result === null && bodyCaught && !bodySettled) {
      // The body threw and the engine lost the rejection (no memory to queue onThrow): record
      // what its catch saw, without rendering it (the host API runs no script code).
      bodySettled = true;
      finish(lostRecord(bodyThrew));
    }
    if (result === null) return bodySettled ? END_UNRENDERABLE : '';
    return flat(result);
  },
  pending: function getPending() { return pendingCount; },
  probe: heapProbe,
};
