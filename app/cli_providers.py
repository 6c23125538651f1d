"""``pcm providers``: which models answer, in which order, at what price, within which limits.

    pcm providers list [--json]
    pcm providers add ID --kind openai|ollama|anthropic|google --model NAME [--base-url URL]
                      [--api-key-env VAR] [--price-in X] [--price-out Y] [--default]
                      [--yes-send-off-machine] ...
    pcm providers test [ID]
    pcm providers default ID
    pcm providers remove ID
    pcm providers limits [--daily X] [--monthly Y] [--clear] [--json]

The settings live in ``providers.json`` in the data folder (``app.llm.providers.settings``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.config import Settings
from app.core.errors import CoreError

EPILOG = """\
The in-process llama.cpp model (id "llama.cpp") is always there and is the last resort: when a
provider is down before its first token, or a spending limit refuses a priced call, the next
provider answers. API keys are never stored: --api-key-env names the environment variable that
holds the key. An endpoint that is not this machine (not localhost/127.0.0.1/::1) is refused
unless you add --yes-send-off-machine: your sessions' text is then sent there.

examples:
  pcm providers add lab --kind openai --base-url http://127.0.0.1:8080/v1 --model qwen2.5-7b --default
  pcm providers add ollama --kind ollama --model llama3.2
  pcm providers add cloud --kind openai --model gpt-4o-mini --api-key-env OPENAI_API_KEY \\
      --price-in 0.15 --price-out 0.6 --yes-send-off-machine
  pcm providers limits --daily 1 --monthly 10
"""


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.load(args.data_dir)


def _spending(settings: Settings) -> tuple[dict[str, float], dict[str, float]]:
    """Today's and this month's cost by provider, from the store (empty without one)."""
    from app.llm.providers import day_and_month
    from app.store.sqlite import read_spending

    day, month = day_and_month()
    return read_spending(settings.db_path, day), read_spending(settings.db_path, month)


def _limit(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


def cmd_list(args: argparse.Namespace) -> int:
    from app.llm.providers.settings import load_providers

    settings = _settings(args)
    providers = load_providers(settings.data_dir)
    today, month = _spending(settings)
    rows = []
    for p in providers.ordered():
        row = p.model_dump(mode="json")
        row.update(type=p.type, off_machine=p.off_machine, default=p.id == providers.default,
                   spent_today=today.get(p.id, 0.0), spent_this_month=month.get(p.id, 0.0))
        rows.append(row)
    if args.json:
        print(json.dumps({"providers": rows, "daily_limit": providers.daily_limit,
                          "monthly_limit": providers.monthly_limit}, indent=2))
        return 0
    for n, row in enumerate(rows, 1):
        where = "in this process" if row["kind"] == "llama.cpp" else row["base_url"]
        mark = " (default)" if row["default"] else ""
        off = "  OFF THE MACHINE" if row["off_machine"] else ""
        print(f"{n}. {row['id']}{mark}\t{row['kind']}\t{row['model'] or settings.chat_model}\t{where}{off}")
        if row["price_in_per_1k"] or row["price_out_per_1k"]:
            print(f"   price per 1k tokens: in {row['price_in_per_1k']:g}, out {row['price_out_per_1k']:g}; "
                  f"spent today {row['spent_today']:.4f}, this month {row['spent_this_month']:.4f}")
        if row["api_key_env"]:
            print(f"   key from ${row['api_key_env']}")
    print(f"spending limits (all priced providers): daily {_limit(providers.daily_limit)}, "
          f"monthly {_limit(providers.monthly_limit)}; spent today {sum(today.values()):.4f}, "
          f"this month {sum(month.values()):.4f}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    from app.llm.providers.settings import add_provider

    config: dict[str, Any] = {"id": args.id, "provider": args.kind, "model": args.model,
                              "base_url": args.base_url, "api_key_env": args.api_key_env, "name": args.name,
                              "price_in_per_1k": args.price_in, "price_out_per_1k": args.price_out,
                              "daily_limit": args.daily_limit, "monthly_limit": args.monthly_limit,
                              "priority": args.priority, "context_size": args.context_size,
                              "max_tokens": args.max_tokens, "temperature": args.temperature,
                              "timeout_s": args.timeout, "json_schema_style": args.json_schema_style}
    added = add_provider(_settings(args).data_dir, config, args.default, allow_off_machine=args.yes_send_off_machine)
    where = "OFF THE MACHINE: prompts will be sent to " if added.off_machine else "on this machine: "
    print(f"added {added.id} ({added.kind}, {added.model}), {where}{added.base_url}"
          + ("; it is the default" if args.default else ""))
    if added.api_key_env and not added.api_key():
        print(f"note: ${added.api_key_env} is not set in this environment", file=sys.stderr)
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    """Check a provider answers: availability, then a short reply with its latency and cost."""
    from app import main as wiring
    from app.llm.providers import LOCAL_ID
    from app.llm.providers.check import check_provider
    from app.llm.providers.settings import load_providers

    settings = _settings(args)
    providers = load_providers(settings.data_dir)
    config = providers.get(args.id or providers.default)
    if config is None and (args.id or LOCAL_ID) == LOCAL_ID:
        config = providers.ordered()[-1]
    if config is None:
        raise CoreError(f"no provider {args.id!r} (see pcm providers list)")
    local = wiring.load_chat_model(settings) if config.kind == LOCAL_ID else None
    ok, line = check_provider(config, local)
    print(line)
    return 0 if ok else 1


def cmd_default(args: argparse.Namespace) -> int:
    from app.llm.providers.settings import set_default

    set_default(_settings(args).data_dir, args.id)
    print(f"{args.id} is the default provider")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    from app.llm.providers.settings import remove_provider

    settings = remove_provider(_settings(args).data_dir, args.id)
    print(f"removed {args.id}; the default is {settings.default}")
    return 0


def cmd_limits(args: argparse.Namespace) -> int:
    from app.llm.providers.settings import set_limits

    settings = set_limits(_settings(args).data_dir, daily=args.daily, monthly=args.monthly, clear=args.clear)
    if args.json:
        print(json.dumps({"daily_limit": settings.daily_limit, "monthly_limit": settings.monthly_limit}))
        return 0
    print(f"spending limits: daily {_limit(settings.daily_limit)}, monthly {_limit(settings.monthly_limit)}")
    return 0


def add_parsers(sub: Any) -> None:
    """Add ``pcm providers ...`` to the CLI's subcommands."""
    p = sub.add_parser("providers", help="chat providers: list, add, test, default, remove, limits",
                       description="Which models answer, in which order, at what price.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = acts.add_parser("list", help="the providers in the order they are tried, with spending")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_list)
    q = acts.add_parser("add", help="add (or replace) a provider", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("id", help="a short name for it (letters, digits, . _ -)")
    q.add_argument("--kind", required=True, choices=["openai", "ollama", "anthropic", "google"],
                   help="openai: any OpenAI-compatible endpoint (llama-server, vLLM, LM Studio, hosted); ollama: "
                        "Ollama's OpenAI-compatible /v1 API; anthropic, google: their OpenAI-compatible endpoints")
    q.add_argument("--model", required=True, help="the model name the endpoint serves")
    q.add_argument("--base-url", help="the endpoint, e.g. http://127.0.0.1:8080/v1 (ollama: http://127.0.0.1:11434/v1)")
    q.add_argument("--api-key-env", help="NAME of the environment variable holding the key (the key is never stored)")
    q.add_argument("--name", help="a display name")
    q.add_argument("--price-in", type=float, help="price per 1,000 prompt tokens")
    q.add_argument("--price-out", type=float, help="price per 1,000 completion tokens")
    q.add_argument("--daily-limit", type=float, help="this provider's own daily spending limit")
    q.add_argument("--monthly-limit", type=float, help="this provider's own monthly spending limit")
    q.add_argument("--priority", type=int, help="lower is tried earlier (after the default; default 100)")
    q.add_argument("--context-size", type=int, help="the served model's context window in tokens")
    q.add_argument("--max-tokens", type=int, help="cap on answer tokens")
    q.add_argument("--temperature", type=float, help="override the temperature of every call")
    q.add_argument("--timeout", type=float, help="seconds to the first token and between tokens; the whole call gets that plus the answer cap at 2 tokens/s (default 60)")
    q.add_argument("--json-schema-style", choices=["json_schema", "json_object", "none"],
                   help="how to ask for JSON output: the standard json_schema; json_object with a schema "
                        "(llama-cpp-python's server); none")
    q.add_argument("--default", action="store_true", help="try this provider first")
    q.add_argument("--yes-send-off-machine", action="store_true",
                   help="confirm that prompts may be sent to an endpoint that is not this machine")
    q.set_defaults(func=cmd_add)
    q = acts.add_parser("test", help="check that a provider is reachable and answers (default: the default one)")
    q.add_argument("id", nargs="?")
    q.set_defaults(func=cmd_test)
    q = acts.add_parser("default", help="make a provider the one tried first")
    q.add_argument("id")
    q.set_defaults(func=cmd_default)
    q = acts.add_parser("remove", help="remove a provider (the in-process model stays)")
    q.add_argument("id")
    q.set_defaults(func=cmd_remove)
    q = acts.add_parser("limits", help="daily and monthly spending limits over all priced providers")
    q.add_argument("--daily", type=float)
    q.add_argument("--monthly", type=float)
    q.add_argument("--clear", action="store_true", help="remove both limits")
    q.add_argument("--json", action="store_true", help="the limits in force as JSON {daily_limit, monthly_limit}")
    q.set_defaults(func=cmd_limits)
