# host.hcl of a wophost release. The .deb and .rpm install it as
# /etc/wophost/host.hcl, the config of the wophost service; an archive holds
# it beside the binaries, with plugin_dir and state_dir relative to it.
# Every setting is documented in docs/configuration.md. Check a change with
# `wophost --config /etc/wophost/host.hcl validate` before
# `systemctl reload wophost` applies it (a config with errors is refused
# and the running host keeps serving). Secrets go in
# /etc/wophost/environment (NAME=value lines, mode 0600), read here with
# env(), never written in this file.

host {
  plugin_dir = "/usr/lib/wophost"   # where the bare plugin names below are found
  state_dir  = "/var/lib/wophost"   # durable state; the service may write nowhere else
  log_level  = "info"               # trace | debug | info | warn | error | off; logs go to the journal

  http {
    # WOPHOST_LISTEN in /etc/wophost/environment moves it; beyond loopback
    # set tokens too.
    listen = env("WOPHOST_LISTEN", "127.0.0.1:7427")
    # tokens = [env("WOPHOST_API_TOKEN")]
  }
}

# aiEnvelope on the offline local provider: a fixed template, no model and
# no network. docs/families/aienvelope.md points it at a real provider.
capability "ai" {
  plugin = "wophost-aienvelope"
  config {
    default_provider = "local"
    provider "local" {
      type = "local"
    }
  }
}

# promptLibrary: pinned, verbatim prompts (`wophost prompts publish`).
capability "prompts" {
  plugin = "wophost-promptlib"
  config {
    dir = "store"                   # inside state_dir/plugins/prompts/
  }
}

# mcp: the MCP servers packs reach through ctx.mcp; add server blocks.
capability "mcp" {
  plugin = "wophost-mcp"
}

# agentRuntime: runs the agents that packs install, on aiEnvelope.
capability "agents" {
  plugin = "wophost-agentrt"
  config {
    store_file = "agents.db"        # inside state_dir/plugins/agents/
  }
}

# Packs: one block each, with the path of the pack's directory, e.g.
# pack "community.acme.notes" {
#   path = "/opt/wophost-packs/notes"
# }
