"""Few-shot examples of the sample `Invoice` (made by jobs/sample/make_invoices.py, from another seed than the
evaluated documents)."""

EXAMPLES = [{'document': 'Kestrel Logistics Ltd\n'
              '9 Dock Road, Liverpool L3 4AB\n'
              '\n'
              'INVOICE KES-2026-8301\n'
              'Date of issue: October 23, 2026\n'
              '\n'
              'Description | Qty | Unit price | Amount\n'
              'USB-C cable 2m | 8 | £9.17 | £73.36\n'
              'On-site installation | 10 | £340.98 | £3,409.80\n'
              'Consulting hours | 1 | £113.55 | £113.55\n'
              '\n'
              'Subtotal: £3,596.71\n'
              'Tax: £719.34\n'
              'Total due (GBP): £4,316.05\n'
              '\n'
              'Thank you for your business.',
  'output': {'currency': 'GBP',
             'customer': None,
             'due_date': None,
             'invoice_number': 'KES-2026-8301',
             'issue_date': '2026-10-23',
             'items': ['USB-C cable 2m', 'On-site installation', 'Consulting hours'],
             'total': 4316.05,
             'vendor': {'address': '9 Dock Road, Liverpool L3 4AB', 'name': 'Kestrel Logistics Ltd'}}},
 {'document': 'Kestrel Logistics Ltd\n'
              '9 Dock Road, Liverpool L3 4AB\n'
              '\n'
              'INVOICE KES-2026-8353\n'
              'Date of issue: September 11, 2026\n'
              'Bill to: Litware Inc\n'
              '\n'
              'Description | Qty | Unit price | Amount\n'
              'Printer toner cartridge | 9 | £63.40 | £570.60\n'
              'A4 copy paper, box of 5 reams | 6 | £24.01 | £144.06\n'
              'Design revisions | 8 | £81.08 | £648.64\n'
              '\n'
              'Subtotal: £1,363.30\n'
              'Tax: £272.66\n'
              'Total due (GBP): £1,635.96\n'
              '\n'
              'Thank you for your business.',
  'output': {'currency': 'GBP',
             'customer': 'Litware Inc',
             'due_date': None,
             'invoice_number': 'KES-2026-8353',
             'issue_date': '2026-09-11',
             'items': ['Printer toner cartridge', 'A4 copy paper, box of 5 reams', 'Design revisions'],
             'total': 1635.96,
             'vendor': {'address': '9 Dock Road, Liverpool L3 4AB', 'name': 'Kestrel Logistics Ltd'}}},
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
