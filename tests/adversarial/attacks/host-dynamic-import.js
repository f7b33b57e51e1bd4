// Attack: load host modules with dynamic import() (QuickJS's std/os, files, data: URLs).
// expect: completed {"loaded": []}
const specifiers = ['std', 'os', 'qjs:std', 'qjs:os', 'bjson', './x.js', '/etc/passwd',
  'file:///etc/passwd', 'data:text/javascript,export default 1', 'node:fs', 'fs'];
const loaded = [];
for (const s of specifiers) {
  try {
    const m = await import(s);
    loaded.push(s + ':' + Object.keys(m).join(','));
  } catch (e) {
    // refused: what we want
  }
}
return {loaded};
