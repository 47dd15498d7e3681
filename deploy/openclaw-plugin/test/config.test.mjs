// Config mistakes disable the plugin (one error line), never the gateway: OpenClaw's schema check accepts any
// plugin config, the plugin's own validation refuses unknown keys with a did-you-mean hint.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { closestKey, CONFIG_KEYS, ConfigError, resolveConfig } from "../lib/config.mjs";

const manifest = JSON.parse(readFileSync(new URL("../openclaw.plugin.json", import.meta.url), "utf8"));

test("the manifest's configSchema lists every config key and constrains none (a failing schema stops the gateway)", () => {
  const schema = manifest.configSchema;
  assert.equal(schema.type, "object", "OpenClaw's own config schema already makes plugin configs objects");
  assert.equal(schema.additionalProperties, true, "unknown keys must pass OpenClaw's check");
  assert.deepEqual(Object.keys(schema.properties).sort(), [...CONFIG_KEYS].sort());
  const allowed = new Set(["description", "default", "title"]);
  for (const [key, property] of Object.entries(schema.properties)) {
    const constraints = Object.keys(property).filter((k) => !allowed.has(k));
    assert.deepEqual(constraints, [], `${key}: a constraint OpenClaw would enforce by refusing to start`);
    assert.ok(property.description, `${key} has a description`);
  }
  const outside = Object.keys(schema).filter((k) => !["$comment", "type", "additionalProperties", "properties"].includes(k));
  assert.deepEqual(outside, []);
  // The defaults OpenClaw fills in are the plugin's own.
  const resolved = resolveConfig({ gatewayId: "gw" });
  for (const [key, property] of Object.entries(schema.properties)) {
    if ("default" in property) assert.deepEqual(resolved[key], property.default, key);
  }
});

test("an unknown key is refused with the closest known key as a hint", () => {
  const message = (raw) => {
    try {
      resolveConfig(raw);
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      return err.message;
    }
    assert.fail(`accepted ${JSON.stringify(raw)}`);
  };
  assert.equal(message({ enfroce: true }), 'unknown config key "enfroce" (did you mean "enforce"?)');
  assert.equal(message({ Brokers: ["k:9092"] }), 'unknown config key "Brokers" (did you mean "brokers"?)');
  assert.equal(message({ verdict_topic: "v" }), 'unknown config key "verdict_topic" (did you mean "verdictTopic"?)');
  assert.equal(message({ hashOnGatway: false }), 'unknown config key "hashOnGatway" (did you mean "hashOnGateway"?)');
  // Nothing close: the known keys are listed instead.
  const far = message({ enforce: true, groupId: "g", maxbufer: 5 });
  assert.match(far, /^unknown config keys "groupId", "maxbufer" \(did you mean "maxBuffer"\?\); known keys: brokers, topic, /);
  assert.equal(
    message({ sasl: { mechanism: "plain", usrname: "u", password: "p" } }),
    'unknown sasl key "usrname" (did you mean "username"?)',
  );
  assert.equal(message({ sasl: { mech: "plain", username: "u", password: "p" } }), 'unknown sasl key "mech" (did you mean "mechanism"?)');
  assert.equal(closestKey("zzzzzz"), null);
});
