'use strict';
// wophost-node-greeter serves the vendor family acme.greet: greet says
// hello to a name, or to the nickname stored for it in acme.kv, which it
// reads by calling back into the host. wophost.js speaks the protocol.

const { serve, WopError } = require('./wophost');

let greeting = 'Hello';

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
        if (typeof input.name !== 'string' || input.name === '') {
          throw new WopError('validation_error', 'field "name": must be a non-empty string');
        }
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
    },
  }],
});
