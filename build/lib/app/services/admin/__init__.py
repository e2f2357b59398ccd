"""The admin screens' services: integrations, connections, components,
workflows, budgets and operators."""
