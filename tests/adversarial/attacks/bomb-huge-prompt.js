// Attack: one prompt over the per-prompt cap.
// expect: error INVALID_ARGUMENT max_prompt_chars=200000
return await agent('x'.repeat(200001));
