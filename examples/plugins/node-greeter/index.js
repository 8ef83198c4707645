'use strict';
// wophost-node-greeter serves the vendor family acme.greet: greet says
// hello to a name, or to the nickname stored for it in acme.kv, which it
// reads by calling back into the host; greetLater says hello after a
// wait, and stops waiting when the call is cancelled or its deadline
// passes. wophost.js speaks the protocol.

const { setTimeout: sleep } = require('node:timers/promises');
const { serve, WopError } = require('./wophost');

let greeting = 'Hello';

// The longest wait greetLater takes.
const MAX_AFTER_MS = 60000;

// checkName refuses a request without a name to greet.
function checkName(input) {
  if (input === null || typeof input !== 'object' || typeof input.name !== 'string' || input.name === '') {
    throw new WopError('validation_error', 'field "name": must be a non-empty string');
  }
}

serve({
  name: 'wophost-node-greeter',
  version: '0.1.0',
  configSchema: {
    attributes: [
      { name: 'greeting', type: 'string', description: 'word to greet with (default "Hello")' },
    ],
  },
  configure(config) {
    if (config.greeting === undefined || config.greeting === null) {
      greeting = 'Hello';
      return [];
    }
    if (config.greeting.trim() === '') {
      return [{ summary: 'Invalid greeting', detail: 'greeting must not be empty or blank', path: ['greeting'] }];
    }
    greeting = config.greeting;
    return [];
  },
  families: [{
    name: 'acme.greet',
    status: 'experimental',
    since: '2.0',
    until: '2027-06-30',
    witness: 'claims-check',
    // greet calls acme.kv back through the host when it is there: the
    // family uses it without needing it.
    uses: ['acme.kv'],
    methods: {
      async greet(input, ctx) {
        checkName(input);
        let who = input.name;
        let from = 'input';
        try {
          const stored = await ctx.host('acme.kv', 'get', { key: `nickname/${input.name}` });
          who = stored.value;
          from = 'acme.kv';
        } catch (err) {
          // No nickname stored, or no acme.kv on this host: greet the name.
          const noNickname = ['acme.key_not_found', 'capability_not_provided'];
          if (!(err instanceof WopError) || !noNickname.includes(err.code)) throw err;
        }
        return { greeting: `${greeting}, ${who}!`, from };
      },
      // greetLater stands for slow work: it waits afterMs milliseconds,
      // but no longer than the caller does, since ctx.signal aborts the
      // wait when the call is cancelled or its deadline passes.
      async greetLater(input, ctx) {
        checkName(input);
        const after = input.afterMs;
        if (!Number.isInteger(after) || after < 0 || after > MAX_AFTER_MS) {
          throw new WopError('validation_error', `field "afterMs": must be an integer from 0 to ${MAX_AFTER_MS}`);
        }
        try {
          await sleep(after, undefined, { signal: ctx.signal });
        } catch (err) {
          if (!ctx.signal.aborted) throw err;
          ctx.log.info('greetLater stopped waiting', { reason: ctx.signal.reason.code });
          throw ctx.signal.reason;
        }
        return { greeting: `${greeting}, ${input.name}!`, from: 'input' };
      },
    },
  }],
});
