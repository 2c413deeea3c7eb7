package main

import (
	"github.com/edgeagent/agent/internal/agentsettings"
	"github.com/edgeagent/agent/internal/settings"
)

// settingsTable is a program's settings (internal/settings.Table).
type settingsTable struct{ *settings.Table }

// agentSettings are the settings of the agent's commands, and
// controlPlaneSettings agent controlplane serve's (internal/agentsettings).
var (
	agentSettings        = &settingsTable{agentsettings.Agent}
	controlPlaneSettings = &settingsTable{agentsettings.ControlPlane}
)
