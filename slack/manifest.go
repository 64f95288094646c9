package slack

import "strings"

// manifest is the Slack app's manifest, as docs/slack.md shows it, with
// requestURLPlaceholder where the interactions address goes.
const manifest = `display_information:
  name: Arbiter
  description: Decide Arbiter's tasks without leaving Slack
features:
  bot_user:
    display_name: Arbiter
    always_online: true
oauth_config:
  scopes:
    bot:
      - chat:write        # post and update the questions
      - users:read        # who clicked
      - users:read.email  # their confirmed address, which names the member
      - channels:history  # find a post whose answer Slack never sent back
      - groups:history    #   the same, in private channels
      - channels:read     # a channel's id from its #name, for that search
      - groups:read       #   the same, for private channels
settings:
  interactivity:
    is_enabled: true
    request_url: ` + requestURLPlaceholder + `
  socket_mode_enabled: false
  org_deploy_enabled: false
  token_rotation_enabled: false
`

const requestURLPlaceholder = "{request_url}"

// Manifest returns the manifest that creates Arbiter's Slack app, its
// interactions posted to requestURL ({APP_URL}/integrations/slack/
// interactions). For Socket Mode, set socket_mode_enabled to true and
// delete request_url.
func Manifest(requestURL string) string {
	return strings.Replace(manifest, requestURLPlaceholder, requestURL, 1)
}
