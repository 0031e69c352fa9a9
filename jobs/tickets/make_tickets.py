"""Writes the support-ticket corpus: 40 customer messages to a shop's support desk, and their gold records.

Deterministic (seeded `random`, no network, no model), so the committed `tickets.parquet` and
`tickets_gold.jsonl` can be re-made byte for byte:

    python jobs/tickets/make_tickets.py [--out DIR]

The messages come in four layouts (an email with headers, a web-form dump, free prose, and a long
email with a history of earlier contacts), write dates and amounts in several usual ways, sometimes
leave a field out (its gold is then null) and often carry a distractor: the message's own date beside
the order date, shipping beside the price, a support agent's name beside the customer's, an earlier
order beside this one. Gold records are shaped like `ticket.SupportTicket`.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
SEED = 20260304
N_TICKETS = 40
LONG_TICKETS = (5, 16, 27, 38)  # 300-600 words each

SHOP = "Brightlane"
NAMES = ["Dana Whitfield", "Marco Bellini", "Aisha Rahman", "Tom O'Connell", "Yuki Tanaka", "Sofia Lindqvist",
         "Kwame Mensah", "Priyanka Desai", "Lukas Brandt", "Emma Carter", "Mateo Alvarez", "Chloe Dubois",
         "Olu Adeyemi", "Hannah Kowalski", "Ravi Iyer", "Grace Liu", "Sean Murphy", "Ingrid Haugen",
         "Carlos Mendes", "Fatima Zahra", "Jonas Becker", "Mia Rossi", "Daniel Kim", "Leah Goldberg"]
HANDLES = ["bluefox", "nightowl", "kayak_fan", "mrs.pepper", "cloudberry", "tinkerer", "quietstorm"]
AGENTS = ["Marcus", "Priya", "Jordan", "Elena", "Sam"]
MAIL_HOSTS = ["example.com", "mailbox.org", "fastmail.net", "outlook.example", "gmail.example"]
PRODUCTS = [
    ("Aurora X2 Wireless Earbuds", 79.99), ("KettlePro 1.7L Electric Kettle", 39.95),
    ("Summit 45L Hiking Backpack", 129.00), ("Lumen LED Desk Lamp", 34.50), ("ThermoCup Travel Mug 16oz", 24.99),
    ("Nimbus Memory Foam Pillow", 59.00), ("Trailblazer Running Shoes", 119.95),
    ("ChefMate 10-Piece Knife Set", 189.00), ("Orbit Smart Watch S3", 199.00),
    ("Cascade Water Filter Pitcher", 32.99), ("Velvet Touch Throw Blanket", 45.00),
    ("Bolt 65W USB-C Charger", 29.99), ("GripMax Yoga Mat", 38.50), ("EchoSound Bluetooth Speaker", 69.99),
    ("Brewmaster Pour-Over Coffee Set", 54.00), ("Atlas Standing Desk Frame", 1249.00),
    ("Glide Ergonomic Office Chair", 389.00), ("Sprout Kids Bike 16-inch", 159.99),
]
CATEGORIES = ("damaged", "wrong_item", "not_delivered", "defective", "billing", "account", "other")
DATE_STYLES = ("%B %-d, %Y", "%m/%d/%Y", "%Y-%m-%d", "%-d %b %Y", "%b %-d, %Y", "%-d %B %Y")
CURRENCY_STYLES = ("${:,.2f}", "€{:,.2f}", "£{:,.2f}", "USD {:,.2f}", "{:,.2f} EUR")

ISSUES = {
    "damaged": ["{The_product} arrived with a cracked casing and the box was crushed on one side.",
                "When I opened the parcel, {the_product} was broken. It looks like it was dropped in transit.",
                "{The_product} showed up dented and badly scratched, clearly damaged during shipping."],
    "wrong_item": ["I ordered {the_product} but the box had a completely different item in it, a phone case.",
                   "The package contained the wrong thing. I was expecting {the_product}.",
                   "You sent the wrong colour and the wrong size. That is not what I ordered."],
    "not_delivered": ["{The_product} still hasn't arrived. Tracking has said 'in transit' for nine days.",
                      "Tracking says the parcel was delivered, but there is nothing at my door or with my neighbours.",
                      "It has been more than three weeks and nothing has been delivered."],
    "defective": ["{The_product} stopped working properly after two days of normal use.",
                  "{The_product} has a fault: it does not work as described, and it got worse within a week.",
                  "Right out of the box {the_product} was faulty. Something inside rattles and it won't work."],
    "billing": ["I was charged twice for this order. My bank statement shows two payments of {amount}.",
                "I cancelled this order within an hour of placing it, but the charge of {amount} still went through.",
                "My card was charged {amount} for an order I had already returned and had confirmed."],
    "account": ["I can't log into my account. The password reset email never arrives, not even in spam.",
                "My account got locked after a few failed logins and the unlock link has expired.",
                "Please change the email address on my account; I no longer use the old one."],
    "other": ["Could you send me a proper VAT invoice for this purchase? I need it for my expenses.",
              "Is {the_product} compatible with the older model's accessories? The listing does not say.",
              "Can I still change the delivery address? I am moving next week."],
}
REFUND = ["I would like a full refund, please.", "Please refund my money.", "I want my money back.",
          "I'd like to return it for a refund."]
NO_REFUND = ["Could you send a replacement?", "Please let me know the next steps.",
             "I don't want a refund, just a replacement that works, as soon as possible.",
             "An exchange would be fine.", "Thanks for your help."]
SUBJECTS = {"damaged": ["Item arrived damaged", "Broken on arrival"], "wrong_item": ["Wrong item received",
            "This is not what I ordered"], "not_delivered": ["Where is my order?", "Parcel never arrived"],
            "defective": ["Product not working", "Faulty unit"], "billing": ["Charged twice", "Billing problem"],
            "account": ["Can't access my account", "Account help"], "other": ["Quick question", "Question"]}
TOPICS = {"damaged": "Order problem", "wrong_item": "Order problem", "not_delivered": "Shipping",
          "defective": "Product support", "billing": "Payments", "account": "My account", "other": "General"}
FILLER = [
    "I have been a customer of yours for about four years and I have never had to write to you before.",
    "To be honest I am quite disappointed, because I recommended your shop to two of my colleagues.",
    "I bought it as a birthday present, so the timing could not have been worse.",
    "I tried calling the hotline twice, but both times I waited for more than forty minutes and gave up.",
    "I kept all the packaging and the original receipt, so I can send photos if that helps.",
    "My partner thinks I should just dispute the payment with the bank, but I would rather sort it out with you.",
    "The delivery driver did not ring the bell, which I only found out about later from the app.",
    "I have read your returns policy on the website and as far as I can tell this is covered.",
    "Please do not send me another automated reply asking me to check the FAQ; I have read it.",
    "I work from home most days, so someone is almost always in to receive a parcel.",
    "I also noticed the confirmation email had a typo in my street name, though the courier seemed to find it.",
    "If it helps, I am happy to take it to a drop-off point myself rather than wait for a collection.",
    "I would appreciate an answer this week, as I am travelling from the end of the month.",
]


def _date_text(rng: random.Random, day: date) -> str:
    return day.strftime(rng.choice(DATE_STYLES))


def _facts(rng: random.Random, category: str, long: bool, may_lack_email: bool) -> dict:
    """One ticket's facts: the gold fields and the distractors its text may write."""
    name = rng.choice(NAMES) if rng.random() > 0.15 else None
    if name:
        first, last = name.lower().replace("'", "").split()
        email = rng.choice([f"{first}.{last}", f"{first[0]}{last}{rng.randint(1, 99)}", f"{last}.{first[:3]}"])
    else:  # a handle that does not spell a name: nothing to infer the customer's name from
        email = f"{rng.choice(HANDLES)}{rng.randint(1, 999)}"
    product, price = rng.choice(PRODUCTS)
    ordered = date(2026, 1, 5) + timedelta(days=rng.randrange(0, 110))
    shape = rng.randrange(6)
    number = [f"{rng.randint(10000, 99999)}", f"ORD-2026-{rng.randint(1, 99999):05d}",
              f"{rng.randint(100, 999)}-{rng.randint(1000000, 9999999)}-{rng.randint(1000000, 9999999)}",
              f"SO{rng.randint(100000, 999999)}", f"BL{rng.randint(1000, 9999)}-{rng.randint(1, 9)}",
              f"W{rng.randint(100000000, 999999999)}"][shape]
    no_order = category == "account"
    facts = {
        "name": name,
        "email": None if may_lack_email and name and rng.random() < 0.3 else f"{email}@{rng.choice(MAIL_HOSTS)}",
        "number": None if no_order or rng.random() < 0.15 else number,
        "product": None if no_order or rng.random() < 0.1 else product,
        "category": category,
        "ordered": None if no_order or rng.random() < 0.25 else ordered,
        "amount": None if no_order or (category != "billing" and rng.random() < 0.25) else price,
        "refund": category not in ("account", "other") and rng.random() < 0.5,
        "sent": ordered + timedelta(days=rng.randint(2, 40)),
        "shipping": rng.choice([4.99, 5.99, 7.50, 9.95]) if rng.random() < 0.4 else None,
        "currency": rng.choice(CURRENCY_STYLES), "date_style": rng.choice(DATE_STYLES), "long": long,
    }
    return facts


def gold_record(f: dict) -> dict:
    return {"customer_name": f["name"], "customer_email": f["email"], "order_number": f["number"],
            "product": f["product"], "issue_category": f["category"],
            "order_date": f["ordered"].isoformat() if f["ordered"] else None, "amount": f["amount"],
            "refund_requested": f["refund"]}


def _money(f: dict, value: float) -> str:
    return f["currency"].format(value)


def _issue(rng: random.Random, f: dict) -> str:
    the = f"the {f['product']}" if f["product"] else rng.choice(["the item", "my order", "it"])
    amount = _money(f, f["amount"]) if f["amount"] is not None else "the full amount"
    text = rng.choice(ISSUES[f["category"]])
    return text.format(the_product=the, The_product=the[0].upper() + the[1:], amount=amount)


def _order_sentences(rng: random.Random, f: dict, issue: str) -> list[str]:
    """What the message says about the order: its number, date, product (unless `issue` names it) and price."""
    out = []
    if f["number"]:
        out.append(rng.choice([f"My order number is {f['number']}.", f"This is about order #{f['number']}.",
                               f"(Order ref: {f['number']})", f"Order {f['number']} is the one I mean."]))
    bought = f"the {f['product']}" if f["product"] else "it"
    if f["ordered"]:
        when = f["ordered"].strftime(f["date_style"])
        out.append(rng.choice([f"I placed the order on {when}.", f"I bought {bought} on {when}.",
                               f"The order was placed on {when}."]))
    if f["product"] and f["product"] not in " ".join([issue, *out]):
        out.append(rng.choice([f"I bought the {f['product']} from your website.", f"It's the {f['product']}.",
                               f"The product is the {f['product']}."]))
    if f["amount"] is not None and f["category"] != "billing":
        paid = _money(f, f["amount"])
        if f["shipping"]:
            out.append(rng.choice([f"I paid {paid} plus {_money(f, f['shipping'])} for shipping.",
                                   f"It cost {paid} (shipping was {_money(f, f['shipping'])} on top)."]))
        else:
            out.append(rng.choice([f"I paid {paid} for it.", f"The price was {paid}."]))
    return out



def _resolution(rng: random.Random, f: dict) -> str:
    if f["category"] in ("account", "other"):
        return rng.choice(["Thanks in advance.", "Please let me know.", "Thank you."])
    if f["category"] == "billing":
        return rng.choice(["Please refund the money you took.", "I want that charge refunded."] if f["refund"]
                          else ["Please look into it.", "Can you check what happened?"])
    return rng.choice(REFUND if f["refund"] else NO_REFUND)


def _sign(f: dict) -> str:
    return f["name"] or ""


def _email(rng: random.Random, f: dict, body: list[str]) -> str:
    sender = f"{f['name']} <{f['email']}>" if f["name"] else f["email"]
    hour, minute = rng.randint(7, 22), rng.randint(0, 59)
    headers = [f"From: {sender}", f"To: support@{SHOP.lower()}.com",
               f"Subject: {rng.choice(SUBJECTS[f['category']])}",
               f"Date: {f['sent'].strftime('%a, %d %b %Y')} {hour:02d}:{minute:02d}:{rng.randint(0, 59):02d} +0000"]
    greeting = rng.choice(["Hi,", "Hello,", f"Dear {SHOP} support,", "Hi there,", "To whom it may concern,"])
    closing = rng.choice(["Thanks,", "Best regards,", "Kind regards,", "Cheers,", "Regards,"])
    signature = "\n".join(x for x in (closing, _sign(f)) if x)
    return "\n".join(headers) + "\n\n" + greeting + "\n\n" + "\n\n".join(body) + "\n\n" + signature + "\n"


def email_ticket(rng: random.Random, f: dict) -> str:
    issue = _issue(rng, f)
    sentences = _order_sentences(rng, f, issue)
    first = " ".join([issue, *sentences[:1]]) if rng.random() < 0.5 else " ".join([*sentences[:1], issue])
    body = [first]
    if sentences[1:]:
        body.append(" ".join(sentences[1:]))
    body.append(_resolution(rng, f))
    return _email(rng, f, body)


def form_ticket(rng: random.Random, f: dict) -> str:
    blank = rng.choice(["", "N/A", "-"])
    amount = _money(f, f["amount"]) if f["amount"] is not None else blank
    lines = ["--- Contact form submission ---",
             f"Submitted: {f['sent'].isoformat()} {rng.randint(7, 22):02d}:{rng.randint(0, 59):02d}",
             f"Name: {f['name'] or blank}", f"Email: {f['email'] or blank}", f"Order #: {f['number'] or blank}",
             f"Product: {f['product'] or blank}",
             f"Purchase date: {f['ordered'].strftime(f['date_style']) if f['ordered'] else blank}",
             f"Amount paid: {amount}", f"Topic: {TOPICS[f['category']]}", "Message:"]
    message = [_issue(rng, f)]
    if f["shipping"] and f["amount"] is not None:
        message.append(f"(The {_money(f, f['shipping'])} delivery fee was charged as well.)")
    message.append(_resolution(rng, f))
    return "\n".join(lines) + "\n" + " ".join(message) + "\n"


def prose_ticket(rng: random.Random, f: dict) -> str:
    opener = f"Hello, this is {f['name']}." if f["name"] else rng.choice(["Hello.", "Hi support team,", "Hi!"])
    issue = _issue(rng, f)
    parts = [opener, *_order_sentences(rng, f, issue), issue, _resolution(rng, f)]
    if f["email"]:
        parts.append(rng.choice([f"You can reach me at {f['email']}.", f"My email is {f['email']}."]))
    return " ".join(parts) + "\n"


def long_ticket(rng: random.Random, f: dict) -> str:
    """An email of 300-600 words: the order, a history of earlier contacts (another date, an agent's name, an
    earlier order), then the request."""
    agent = rng.choice(AGENTS)
    first_contact = f["sent"] - timedelta(days=rng.randint(3, 9))
    earlier = f"{rng.randint(10000, 99999)}"
    issue = _issue(rng, f)
    sentences = _order_sentences(rng, f, issue)
    body = [" ".join(["I am writing again about a problem with my order, and I would like it resolved this time.",
                      *sentences])]
    filler = rng.sample(FILLER, len(FILLER))  # each sentence at most once
    body.append(" ".join([issue, filler.pop(), filler.pop()]))
    body.append(f"I first contacted you about this on {first_contact.strftime('%d %B %Y')}. Your agent {agent} "
                f"told me that the case had been escalated and that someone would get back to me within 48 hours. "
                f"Nobody did. When I followed up, the chat bot gave me a new case number and closed the "
                f"conversation before I could explain anything. {agent} was friendly, I should say, but nothing "
                f"has happened since.")
    body.append(f"For what it's worth, my previous order with you (#{earlier}, a gift card) arrived on time and "
                f"without any problem, which is why this has been such a surprise. "
                + " ".join([filler.pop(), filler.pop(), filler.pop()]))
    while len(" ".join(body).split()) < 330 and filler:
        body.append(" ".join(filler[-2:]))
        del filler[-2:]
    body.append(" ".join([_resolution(rng, f), "I look forward to hearing from you."]))
    return _email(rng, f, body)


LAYOUTS = (email_ticket, form_ticket, prose_ticket)


def make_tickets(seed: int = SEED, n: int = N_TICKETS) -> tuple[list[str], list[str], list[dict]]:
    rng = random.Random(seed)
    categories = list(CATEGORIES) * (n // len(CATEGORIES) + 1)
    rng.shuffle(categories)
    ids, texts, golds = [], [], []
    for k in range(n):
        long = k in LONG_TICKETS
        layout = long_ticket if long else LAYOUTS[k % len(LAYOUTS)]
        category = "defective" if long and categories[k] in ("account", "other") else categories[k]
        f = _facts(rng, category, long, may_lack_email=layout is prose_ticket)  # an email always has a sender
        ids.append(f"tkt-{k:04d}")
        texts.append(layout(rng, f))
        golds.append(gold_record(f))
    return ids, texts, golds


def write_corpus(out: Path) -> None:
    ids, texts, golds = make_tickets()
    out.mkdir(parents=True, exist_ok=True)
    table = pa.table({"ticket_id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string())})
    pq.write_table(table, out / "tickets.parquet")
    with open(out / "tickets_gold.jsonl", "w") as gold:
        for ticket_id, record in zip(ids, golds, strict=True):
            gold.write(json.dumps({"ticket_id": ticket_id, "record": record}, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for tickets.parquet and tickets_gold.jsonl")
    args = parser.parse_args()
    write_corpus(args.out)
    print(f"wrote {N_TICKETS} tickets to {args.out / 'tickets.parquet'} and gold to {args.out / 'tickets_gold.jsonl'}")


if __name__ == "__main__":
    main()
