"""Few-shot examples of the sample `Invoice` (made by jobs/sample/make_invoices.py, from another seed than the
evaluated documents)."""

EXAMPLES = [{'document': 'Maple & Finch Design\n'
              '300 Queen St W, Toronto, ON M5V 2A2\n'
              '\n'
              'INVOICE MAP-2026-9779\n'
              'Date of issue: July 22, 2026\n'
              'Payment due: 05 Aug 2026\n'
              'Bill to: Fabrikam Inc\n'
              '\n'
              'Description | Qty | Unit price | Amount\n'
              'On-site installation | 10 | C$320.30 | C$3,203.00\n'
              '\n'
              'Subtotal: C$3,203.00\n'
              'Tax: C$416.39\n'
              'Total due (CAD): C$3,619.39\n'
              '\n'
              'Thank you for your business.',
  'output': {'currency': 'CAD',
             'customer': 'Fabrikam Inc',
             'due_date': '2026-08-05',
             'invoice_number': 'MAP-2026-9779',
             'issue_date': '2026-07-22',
             'items': ['On-site installation'],
             'total': 3619.39,
             'vendor': {'address': '300 Queen St W, Toronto, ON M5V 2A2', 'name': 'Maple & Finch Design'}}},
 {'document': 'Blue Fjord Consulting AS\n'
              'Storgata 5, 0155 Oslo\n'
              '\n'
              'INVOICE BLU-2026-6054\n'
              'Date of issue: August 03, 2026\n'
              'Payment due: 17 Aug 2026\n'
              'Bill to: Tailspin Toys\n'
              '\n'
              'Description | Qty | Unit price | Amount\n'
              'A4 copy paper, box of 5 reams | 6 | €23.11 | €138.66\n'
              'Software license, annual seat | 12 | €255.07 | €3,060.84\n'
              '\n'
              'Subtotal: €3,199.50\n'
              'Tax: €607.90\n'
              'Total due (EUR): €3,807.40\n'
              '\n'
              'Thank you for your business.',
  'output': {'currency': 'EUR',
             'customer': 'Tailspin Toys',
             'due_date': '2026-08-17',
             'invoice_number': 'BLU-2026-6054',
             'issue_date': '2026-08-03',
             'items': ['A4 copy paper, box of 5 reams', 'Software license, annual seat'],
             'total': 3807.4,
             'vendor': {'address': 'Storgata 5, 0155 Oslo', 'name': 'Blue Fjord Consulting AS'}}},
 {'document': 'Northwind Traders\n'
              '114 Harbor Way, Seattle, WA 98101\n'
              '\n'
              'INVOICE NOR-2026-8005\n'
              'Date of issue: April 16, 2026\n'
              'Payment due: 31 May 2026\n'
              'Bill to: Litware Inc\n'
              '\n'
              'Description | Qty | Unit price | Amount\n'
              'Monthly hosting | 5 | $86.26 | $431.30\n'
              'Printer toner cartridge | 3 | $75.76 | $227.28\n'
              'On-site installation | 4 | $328.65 | $1,314.60\n'
              '\n'
              'Subtotal: $1,973.18\n'
              'Tax: $162.79\n'
              'Total due (USD): $2,135.97\n'
              '\n'
              'Thank you for your business.',
  'output': {'currency': 'USD',
             'customer': 'Litware Inc',
             'due_date': '2026-05-31',
             'invoice_number': 'NOR-2026-8005',
             'issue_date': '2026-04-16',
             'items': ['Monthly hosting', 'Printer toner cartridge', 'On-site installation'],
             'total': 2135.97,
             'vendor': {'address': '114 Harbor Way, Seattle, WA 98101', 'name': 'Northwind Traders'}}}]
