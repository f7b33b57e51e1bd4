// design-fanout: one agent per competing direction; the caller passes rendered prompts in
// args and, optionally, model/effort routing that is spread into every call's options.
export const meta = {
  name: "design-fanout",
  description:
    "Dispatch one agent per design direction and report which came back, which blocked and which returned nothing.",
  whenToUse: "When two to eight directions are confirmed.",
  phases: [{ title: "Fan-out", detail: "one agent per direction, in parallel" }],
};

const RESULT = {
  type: "object",
  required: ["variant", "file", "status"],
  properties: {
    variant: { type: "string", description: "the direction's name" },
    file: { type: "string", description: "the file it wrote" },
    status: { type: "string", enum: ["ok", "blocked"], description: "ok or blocked" },
    blocked_reason: { type: "string" },
  },
};

const variants = Array.isArray(args.variants) ? args.variants : [];
if (variants.length < 2 || variants.length > 8) {
  throw new Error(`design-fanout: needs 2..8 variants (got ${variants.length})`);
}

phase("Fan-out");
const raw = await parallel(
  variants.map((v) => () => {
    const opts = {
      ...(args.routing?.["variant-builder"] ?? {}),
      label: v.name,
      phase: "Fan-out",
      schema: RESULT,
    };
    if (args.operatorModel) opts.model = args.operatorModel;
    return agent(v.prompt, opts);
  })
);

const kept = [];
const dropped = [];
const blocked = [];
raw.forEach((result, i) => {
  const name = variants[i].name;
  if (!result) {
    dropped.push({ variant: name });
    return;
  }
  if (result.status === "blocked") {
    blocked.push({ variant: name, reason: result.blocked_reason || "no reason given" });
    return;
  }
  kept.push({ ...result, variant: name });
});
if (dropped.length === variants.length) throw new Error("design-fanout: every variant returned nothing");
log(`Done: ${kept.length}/${variants.length} clean, ${blocked.length} blocked, ${dropped.length} dropped.`);
return { variants: kept, dropped, blocked };
