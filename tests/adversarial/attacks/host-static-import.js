// Attack: a static import of QuickJS's std module at the top of the body.
// expect: error SCRIPT_PARSE "uses an ES" "line 3"
import * as std from 'std';
return std.getenv('HOME');
