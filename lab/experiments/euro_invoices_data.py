"""Word lists and tables of `euro_invoices.py` (a blind stand-in for issue 54's held-out job): each locale's
vendors, buyers, items, VAT rates, addresses and invoice vocabulary, as such documents print them."""

from __future__ import annotations

NBSP = "\u00a0"
NNBSP = "\u202f"

# Per locale: how many documents, and which layouts they take (cycled in order).
PLAN: list[tuple[str, int, list[str]]] = [
    ("de_DE", 5, ["block", "grid", "prose", "receipt", "block"]),
    ("de_AT", 3, ["block", "prose", "receipt"]),
    ("de_CH", 2, ["grid", "block"]),
    ("fr_FR", 5, ["block", "grid", "prose", "receipt", "block"]),
    ("fr_BE", 2, ["grid", "block"]),
    ("es_ES", 6, ["block", "grid", "prose", "receipt", "block", "grid"]),
    ("it_IT", 6, ["block", "grid", "prose", "receipt", "block", "prose"]),
    ("nl_NL", 5, ["block", "grid", "prose", "receipt", "block"]),
    ("nl_BE", 2, ["block", "grid"]),
    ("pt_BR", 6, ["danfe", "nfse", "block", "prose", "receipt", "danfe"]),
]

MONTHS = {
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember".split(),
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre".split(),
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre".split(),
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre".split(),
    "nl": "januari februari maart april mei juni juli augustus september oktober november december".split(),
    "pt": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro".split(),
}

VENDORS = {
    "de_DE": ["Elektro Brandt GmbH", "Druckerei Hoffmann & Söhne KG", "Kanzlei Dr. Wagner & Partner mbB",
              "Bäckerei Vogt", "Autohaus Krüger GmbH & Co. KG", "Getränke Lindner e.K."],
    "de_AT": ["Ing. Franz Huber GmbH", "Tischlerei Gruber KG", "Café Konditorei Moser OG"],
    "de_CH": ["Sanitär Keller AG", "Treuhand Meier & Co. GmbH"],
    "fr_FR": ["Atelier Dubois SAS", "Cabinet Girard & Associés", "Plomberie Lefèvre EURL",
              "Boulangerie Martin SARL", "Imprimerie Rousseau SA"],
    "fr_BE": ["Menuiserie Lambert SRL", "Bureau d'études Dupont SA"],
    "es_ES": ["Reformas García Hermanos S.L.", "Distribuciones López S.A.", "Asesoría Fernández y Asociados S.L.",
              "Cafetería El Sol S.C.", "Taller Mecánico Ruiz S.L.U.", "Gráficas Navarro S.L."],
    "it_IT": ["Idraulica Bianchi S.r.l.", "Ferramenta Colombo S.p.A.", "Studio Tecnico Ing. Ferrari S.r.l.",
              "Bar Pasticceria Ricci di Ricci Marco", "Tipografia Esposito S.n.c.", "Trasporti Romano & Figli S.r.l."],
    "nl_NL": ["Installatiebedrijf De Vries B.V.", "Schildersbedrijf Bakker V.O.F.", "Adviesbureau Visser & Co B.V.",
              "Bakkerij Jansen", "Drukkerij Smit B.V."],
    "nl_BE": ["Bouwbedrijf Peeters BV", "Brouwerij Claes NV"],
    "pt_BR": ["Silva Materiais de Construção Ltda.", "Costa Informática Ltda. - ME", "Auto Peças Almeida Ltda.",
              "Oliveira & Souza Serviços Contábeis Ltda.", "Padaria Pão Dourado Ltda.",
              "Transportadora Rodrigues S.A."],
}

BUYERS = {
    "de": ["Schulz Immobilien GmbH", "Praxis Dr. med. Anna Roth", "Fischer Logistik AG", "Gemeinde Oberau"],
    "fr": ["SCI Les Tilleuls", "Garage Moreau SARL", "Mairie de Saint-Aubin", "Laurent Conseil SAS"],
    "es": ["Comunidad de Propietarios Calle Olmo 7", "Hostal Sánchez S.L.", "Clínica Dental Ortega S.L.P."],
    "it": ["Condominio Via Verdi 12", "Ristorante Da Gino S.r.l.", "Farmacia Conti S.a.s."],
    "nl": ["Vereniging van Eigenaars Parkzicht", "Hotel De Linde B.V.", "Tandartspraktijk Mulder"],
    "pt": ["Construtora Pereira Ltda.", "Condomínio Edifício Aurora", "Clínica Santos & Lima S/S"],
}

ITEMS = {
    "de": [("Arbeitszeit Monteur (Std.)", 58.0, 78.0), ("Installationsmaterial pauschal", 40.0, 260.0),
           ("Anfahrt", 25.0, 45.0), ("Beratung (Std.)", 95.0, 160.0), ("Druck Flyer A5, 2.000 Stk.", 180.0, 420.0),
           ("Wartung Heizungsanlage", 120.0, 240.0), ("Entsorgung Altmaterial", 30.0, 85.0)],
    "fr": [("Main d'œuvre (heure)", 45.0, 72.0), ("Fournitures diverses", 30.0, 240.0),
           ("Déplacement", 25.0, 60.0), ("Honoraires de conseil", 300.0, 1200.0),
           ("Impression brochures A4", 150.0, 560.0), ("Remplacement chauffe-eau 200 L", 480.0, 890.0)],
    "es": [("Mano de obra (horas)", 28.0, 45.0), ("Material de fontanería", 35.0, 310.0),
           ("Desplazamiento", 20.0, 40.0), ("Asesoramiento fiscal trimestral", 150.0, 450.0),
           ("Pintura de fachada (m²)", 9.0, 16.0), ("Cambio de aceite y filtros", 60.0, 120.0)],
    "it": [("Manodopera (ore)", 30.0, 48.0), ("Materiale idraulico", 40.0, 280.0), ("Diritto di chiamata", 25.0, 50.0),
           ("Consulenza tecnica", 200.0, 900.0), ("Stampa biglietti da visita", 60.0, 140.0),
           ("Trasporto merci Milano-Bologna", 320.0, 780.0)],
    "nl": [("Arbeidsloon (uur)", 48.0, 70.0), ("Materiaal", 30.0, 250.0), ("Voorrijkosten", 25.0, 45.0),
           ("Advieswerkzaamheden", 110.0, 160.0), ("Schilderwerk kozijnen", 350.0, 900.0),
           ("Drukwerk folders A5", 120.0, 380.0)],
    "pt": [("Mão de obra (hora)", 60.0, 120.0), ("Cimento CP II 50 kg", 28.0, 42.0), ("Areia média (m³)", 90.0, 140.0),
           ("Honorários contábeis mensais", 450.0, 1200.0), ("Manutenção de computadores", 150.0, 380.0),
           ("Frete", 40.0, 180.0), ("Pastilha de freio dianteira", 85.0, 190.0)],
}

RECEIPT_ITEMS = {
    "de": [("Brötchen", 0.45), ("Bauernbrot 750g", 3.80), ("Kaffee gr.", 3.20), ("Butterbrezel", 1.95),
           ("Apfelstrudel", 3.60), ("Milch 1L", 1.19), ("Mineralwasser 0,5l", 1.49)],
    "fr": [("Baguette tradition", 1.30), ("Croissant", 1.15), ("Pain aux céréales", 3.40), ("Café", 1.80),
           ("Tarte aux pommes", 14.50), ("Éclair chocolat", 2.90)],
    "es": [("Café con leche", 1.60), ("Tostada con tomate", 2.40), ("Zumo de naranja", 2.80), ("Croissant", 1.50),
           ("Bocadillo jamón", 4.20), ("Agua 50cl", 1.20)],
    "it": [("Caffè", 1.20), ("Cornetto", 1.40), ("Cappuccino", 1.60), ("Spremuta", 3.50), ("Tramezzino", 3.00),
           ("Acqua nat. 0,5L", 1.00)],
    "nl": [("Volkorenbrood", 3.25), ("Krentenbollen 6st", 3.10), ("Appelflap", 1.95), ("Koffie", 2.80),
           ("Stroopwafels", 2.49)],
    "pt": [("Pão francês kg", 16.90), ("Café expresso", 6.50), ("Pão de queijo", 4.50), ("Leite integral 1L", 5.49),
           ("Bolo de fubá fatia", 7.90), ("Suco de laranja 300ml", 9.00)],
}

RATES = {"de_DE": [19, 7], "de_AT": [20, 10], "de_CH": [8.1, 2.6], "fr_FR": [20, 10, 5.5], "fr_BE": [21, 6],
         "es_ES": [21, 10], "it_IT": [22, 10], "nl_NL": [21, 9], "nl_BE": [21, 6], "pt_BR": [18, 12]}
RECEIPT_RATE = {"de_DE": 7, "de_AT": 10, "de_CH": 2.6, "fr_FR": 5.5, "fr_BE": 6, "es_ES": 10, "it_IT": 10,
                "nl_NL": 9, "nl_BE": 6, "pt_BR": 0}

CITIES = {
    "de_DE": [("Lindenstraße 14", "04109 Leipzig", "0341 9988770"), ("Am Markt 3", "50667 Köln", "0221 4711230"),
              ("Hauptstr. 112", "70173 Stuttgart", "0711 2233445")],
    "de_AT": [("Mariahilfer Straße 45", "1060 Wien", "+43 1 5874411"), ("Herrengasse 7", "8010 Graz", "0316 823344")],
    "de_CH": [("Bahnhofstrasse 21", "8001 Zürich", "044 211 45 67"), ("Marktgasse 9", "3011 Bern", "031 312 88 10")],
    "fr_FR": [("12 rue des Lilas", "69003 Lyon", "04 78 62 31 10"), ("5 avenue Jean Jaurès", "31000 Toulouse",
                                                                     "05 61 22 45 80"),
              ("28 boulevard Voltaire", "75011 Paris", "01 43 55 21 09")],
    "fr_BE": [("Rue Haute 48", "1000 Bruxelles", "02 512 34 56"),
              ("Rue de la Station 3", "4000 Liège", "04 223 45 67")],
    "es_ES": [("Calle Mayor, 15", "28013 Madrid", "912 345 678"), ("Carrer de Provença, 210", "08036 Barcelona",
                                                                   "934 512 300"),
              ("Avda. de la Constitución, 8", "41004 Sevilla", "954 221 870")],
    "it_IT": [("Via Roma, 21", "20121 Milano", "02 8645 1120"), ("Corso Vittorio Emanuele II, 54", "10123 Torino",
                                                                 "011 562 3344"),
              ("Via dei Mille, 7", "80121 Napoli", "081 410 2255")],
    "nl_NL": [("Kerkstraat 8", "1017 GC Amsterdam", "020-6231145"), ("Oudegracht 112", "3511 AX Utrecht",
                                                                      "030-2314567")],
    "nl_BE": [("Meir 54", "2000 Antwerpen", "03 231 45 67"), ("Veldstraat 12", "9000 Gent", "09 223 11 45")],
    "pt_BR": [("Rua das Flores, 123 - Centro", "01010-000 São Paulo - SP", "(11) 3456-7890"),
              ("Av. Afonso Pena, 1500 - Funcionários", "30130-005 Belo Horizonte - MG", "(31) 3224-5566"),
              ("Rua XV de Novembro, 88", "80020-310 Curitiba - PR", "(41) 3322-1100")],
}


L = {
    "de": dict(
        title="RECHNUNG", number=["Rechnungsnummer", "Rechnungs-Nr.", "Re.-Nr.", "Rechnung Nr."],
        date=["Rechnungsdatum", "Datum", "Rechnungsdatum"], customer="Kundennummer", delivery="Lieferdatum",
        due=["Fälligkeit", "Zahlbar bis", "Fällig am"], net=["Nettobetrag", "Summe netto", "Zwischensumme netto"],
        total=["Gesamtbetrag", "Rechnungsbetrag", "Gesamtsumme brutto", "Zu zahlender Betrag"],
        cols=("Pos.", "Bezeichnung", "Menge", "Einzelpreis", "Gesamt"), page="Seite",
        bank="Bankverbindung", thanks="Vielen Dank für Ihren Auftrag!",
    ),
    "fr": dict(
        title="FACTURE", number=["N° de facture", "Facture N°", "Numéro de facture", "Facture n°"],
        date=["Date de facture", "Date", "Date d'émission"], customer="Réf. client", delivery="Date de livraison",
        due=["Date d'échéance", "Échéance", "À régler avant le"], net=["Total HT", "Montant HT", "Sous-total HT"],
        total=["Total TTC", "Net à payer", "Montant TTC"],
        cols=("Réf.", "Désignation", "Qté", "P.U. HT", "Montant HT"), page="Page",
        bank="Coordonnées bancaires", thanks="Merci de votre confiance.",
    ),
    "es": dict(
        title="FACTURA", number=["Nº Factura", "Factura nº", "Número de factura", "Factura Nº"],
        date=["Fecha", "Fecha de factura", "Fecha de emisión"], customer="Cód. cliente", delivery="Fecha de entrega",
        due=["Fecha de vencimiento", "Vencimiento", "Vto."], net=["Base imponible", "Base Imponible", "Subtotal"],
        total=["TOTAL FACTURA", "Total", "Importe total"],
        cols=("Ref.", "Concepto", "Cant.", "Precio", "Importe"), page="Página",
        bank="Transferencia bancaria", thanks="Gracias por su confianza.",
    ),
    "it": dict(
        title="FATTURA", number=["Fattura n.", "Numero fattura", "Fattura nr.", "N. documento"],
        date=["Data", "Data fattura", "Data documento"], customer="Cod. cliente", delivery="DDT del",
        due=["Scadenza", "Data scadenza", "Scadenza pagamento"], net=["Imponibile", "Totale imponibile", "Imponibile"],
        total=["Totale documento", "Totale fattura", "Totale da pagare"],
        cols=("Cod.", "Descrizione", "Q.tà", "Prezzo unit.", "Importo"), page="Pag.",
        bank="Coordinate bancarie", thanks="Grazie per aver scelto i nostri servizi.",
    ),
    "nl": dict(
        title="FACTUUR", number=["Factuurnummer", "Factuurnr.", "Factuur nr."],
        date=["Factuurdatum", "Datum", "Factuurdatum"], customer="Klantnummer", delivery="Leverdatum",
        due=["Vervaldatum", "Te betalen vóór", "Vervaldag"],
        net=["Totaal excl. BTW", "Subtotaal", "Totaal exclusief btw"],
        total=["Totaal incl. BTW", "Te betalen", "Totaal"],
        cols=("Nr.", "Omschrijving", "Aantal", "Prijs", "Bedrag"), page="Pagina",
        bank="Betaalgegevens", thanks="Bedankt voor uw opdracht.",
    ),
    "pt": dict(
        title="FATURA", number=["Fatura nº", "Nº da fatura", "Número"],
        date=["Data de emissão", "Emissão", "Data"], customer="Cód. cliente", delivery="Data de entrega",
        due=["Vencimento", "Data de vencimento", "Vencimento"], net=["Subtotal", "Valor dos produtos", "Subtotal"],
        total=["Total", "Valor total", "Total a pagar"],
        cols=("Item", "Descrição", "Qtd.", "Valor unit.", "Valor total"), page="Página",
        bank="Dados bancários", thanks="Obrigado pela preferência!",
    ),
}
