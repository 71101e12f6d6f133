"""The customer-support sessions (a retail desk, a helpdesk, tau-bench's airline tasks, a tau2-bench
telecom task), as Scripts."""

from __future__ import annotations

import hashlib
import json

from script import C, Script

RETAIL_SYSTEM = ("You are a customer support agent for Northwind Outfitters. Verify the customer's "
                 "identity before touching an order. Refunds go back to the original payment "
                 "method. Be concise and friendly.")


def support_clean() -> Script:
    s = Script("support-clean", "2026-03-02T09:14:05")
    s.user("Hi, I ordered a rain shell last week and it still hasn't shipped. Order #W4471903.")
    s.say("I'm sorry about the wait! To look into it, could you confirm the email address on "
          "the account?")
    s.user("sure, it's dana.okafor@example.com")
    s.calls(C("find_user_id_by_email", {"email": "dana.okafor@example.com"}, "dana_okafor_1187"))
    s.calls(C("get_order_details", {"order_id": "#W4471903"}, json.dumps({
        "order_id": "#W4471903", "user_id": "dana_okafor_1187", "status": "pending",
        "items": [{"name": "Stormline Rain Shell", "size": "M", "color": "slate",
                   "item_id": "8125664320", "price": 149.0}],
        "fulfillments": [], "payment_history": [{"transaction_type": "payment",
                                                  "amount": 149.0,
                                                  "payment_method_id": "credit_card_4402"}]})))
    s.calls(C("get_product_details", {"product_id": "6938111410"}, json.dumps({
        "name": "Stormline Rain Shell", "variants": {"8125664320": {
            "options": {"size": "M", "color": "slate"}, "available": False,
            "restock_date": "2026-03-06"}}})))
    s.say("Thanks, Dana. Your order #W4471903 is still pending because the slate Stormline "
          "Rain Shell in size M is back-ordered until March 6. I can keep the order as is, switch "
          "it to an in-stock color, or cancel it for a full refund to your card ending 4402.")
    s.user("Is the black one in stock in M?")
    s.calls(C("get_product_details", {"product_id": "6938111410", "options": {"color": "black"}},
              json.dumps({"name": "Stormline Rain Shell", "variants": {"8125664301": {
                  "options": {"size": "M", "color": "black"}, "available": True,
                  "price": 149.0}}})))
    s.say("Yes, black in size M is in stock at the same price ($149). Shall I switch your "
          "pending order to black? Please reply yes to confirm.")
    s.user("yes please")
    s.calls(C("modify_pending_order_items", {
        "order_id": "#W4471903", "item_ids": ["8125664320"], "new_item_ids": ["8125664301"],
        "payment_method_id": "credit_card_4402"}, json.dumps({
            "order_id": "#W4471903", "status": "pending (item modified)",
            "items": [{"name": "Stormline Rain Shell", "size": "M", "color": "black",
                       "item_id": "8125664301", "price": 149.0}]})))
    s.say("Done! Order #W4471903 now has the black Stormline Rain Shell (M) and should ship "
          "within 1–2 business days. No price difference was charged. Anything else?")
    s.user("That's all, thanks!")
    s.say("You're welcome, Dana. Have a great day!")
    return s


def support_duplicate_batch() -> Script:
    s = Script("support-dup-batch", "2026-03-03T14:02:40")
    s.user("I returned the trail runners two weeks ago and still haven't got my money back. "
           "Order #W9012244, email li.wen@example.org")
    s.calls(C("find_user_id_by_email", {"email": "li.wen@example.org"}, "li_wen_5520"),
            C("get_order_details", {"order_id": "#W9012244"}, json.dumps({
                "order_id": "#W9012244", "user_id": "li_wen_5520", "status": "return received",
                "items": [{"name": "Ridgeback Trail Runner", "item_id": "4410937755",
                           "price": 118.5}],
                "payment_history": [{"transaction_type": "payment", "amount": 118.5,
                                     "payment_method_id": "paypal_7731"}]})),
            text="Let me pull up your account and the order.")
    s.say("I see the return for order #W9012244 arrived at our warehouse, but the refund of "
          "$118.50 hasn't been issued yet. I can issue it now to your PayPal account "
          "(paypal_7731). Shall I go ahead?")
    s.user("Yes, go ahead.")
    # The model emitted the same refund twice in one parallel batch: a double refund in the making.
    refund = {"order_id": "#W9012244", "amount": 118.5, "payment_method_id": "paypal_7731",
              "reason": "return received"}
    s.calls(C("issue_refund", refund, json.dumps({"refund_id": "rf_2Q81", "status": "issued",
                                                   "amount": 118.5})),
            C("issue_refund", refund, json.dumps({"refund_id": "rf_2Q82", "status": "issued",
                                                   "amount": 118.5})),
            C("send_customer_email", {"to": "li.wen@example.org",
                                      "template": "refund_issued",
                                      "order_id": "#W9012244"}, "queued: msg_5f1c"),
            text="Issuing the refund and sending a confirmation email.")
    s.say("Your refund of $118.50 for order #W9012244 has been issued to PayPal; it usually "
          "appears within 3–5 business days. A confirmation email is on its way.")
    return s


def support_ladder() -> Script:
    """The agent keeps re-sending the same email: each send 'works', so answers differ."""
    s = Script("support-ladder", "2026-03-04T16:40:12")
    s.user("Ticket #58213 from Marisol Vega: she never received the password reset email. "
           "Please resend it and let her know.")
    s.calls(C("lookup_customer", {"ticket_id": 58213}, json.dumps({
        "customer_id": "cus_81HQ2", "name": "Marisol Vega", "email": "m.vega@example.net",
        "email_status": "soft_bounce (mailbox full)", "plan": "Team"})),
        text="Looking up the customer on ticket #58213.")
    email = {"customer_id": "cus_81HQ2", "template": "password_reset",
             "to": "m.vega@example.net"}
    for n in range(5):
        s.calls(C("send_email", email, json.dumps({
            "message_id": f"<{hashlib.sha1(f'reset{n}'.encode()).hexdigest()[:16]}@mail.helpdesk.io>",
            "status": "queued"})), text="Resending the password reset email.")
    s.calls(C("add_ticket_note", {"ticket_id": 58213, "note": "Reset email resent. Address "
                                   "soft-bounces (mailbox full); asked customer to free space."},
              "note_id: 99120"))
    s.say("I've resent the password reset to m.vega@example.net. Her mailbox is reporting full "
          "(soft bounce), so I've noted on the ticket that she should free up space or give us "
          "an alternate address.")
    return s


def tau_multirun() -> Script:
    """A support dialog: each user message is a run; one run halts on a repeated booking."""
    s = Script("tau-multirun", "2026-01-15T15:00:00")
    s.user("Hi, I need to change my flight. My user id is omar_haddad_4410.")
    s.calls(C("get_user_details", {"user_id": "omar_haddad_4410"}, json.dumps({
        "name": {"first_name": "Omar", "last_name": "Haddad"}, "membership": "gold",
        "reservations": ["K7QX2M", "PZ31DA"],
        "payment_methods": {"credit_card_9932": {"brand": "visa", "last_four": "9932"}}})))
    s.say("Thanks, Omar. Which reservation would you like to change: K7QX2M or PZ31DA?")
    res = {"reservation_id": "K7QX2M"}
    res_out = json.dumps({"reservation_id": "K7QX2M", "origin": "BOS", "destination": "ORD",
                          "flights": [{"flight_number": "HAT214", "date": "2024-05-21"}],
                          "cabin": "economy", "passengers": 1})
    s.user("K7QX2M please, the Boston one.")
    s.calls(C("get_reservation_details", res, res_out))
    s.say("K7QX2M is BOS → ORD on May 21 (HAT214), economy. What would you like to change?")
    s.user("Move it to May 22, same route, morning if possible.")
    s.calls(C("get_reservation_details", res, res_out))
    s.calls(C("search_direct_flight", {"origin": "BOS", "destination": "ORD",
                                       "date": "2024-05-22"}, json.dumps([
        {"flight_number": "HAT118", "departure": "07:10", "price": {"economy": 164}},
        {"flight_number": "HAT302", "departure": "18:40", "price": {"economy": 139}}])))
    s.say("On May 22 there's HAT118 departing 07:10 ($164, a $22 difference). Shall I switch "
          "K7QX2M to HAT118, paying the difference with your Visa ending 9932?")
    s.user("Yes, do it.")
    upd = {"reservation_id": "K7QX2M", "cabin": "economy",
           "flights": [{"flight_number": "HAT118", "date": "2024-05-22"}],
           "payment_id": "credit_card_9932"}
    for _ in range(3):
        s.calls(C("update_reservation_flights", upd,
                  "Error: payment method credit_card_9932 declined: card expired",
                  error=True))
    s.say("The update failed because the Visa ending 9932 is reported as expired. Do you have "
          "another payment method, such as a travel certificate?")
    s.user("Use my certificate then, certificate_1180.")
    s.calls(C("update_reservation_flights", {**upd, "payment_id": "certificate_1180"},
              json.dumps({"reservation_id": "K7QX2M", "flights": [
                  {"flight_number": "HAT118", "date": "2024-05-22"}], "status": "confirmed"})))
    s.say("All set: K7QX2M is now on HAT118, May 22 at 07:10, paid with certificate_1180.")
    return s


def tau_short() -> Script:
    s = Script("tau-short", "2026-01-15T16:20:00")
    s.user("What's the baggage allowance on reservation ZZ8L0P? I'm user ana_lima_2203.")
    s.calls(C("get_reservation_details", {"reservation_id": "ZZ8L0P"}, json.dumps({
        "reservation_id": "ZZ8L0P", "user_id": "ana_lima_2203", "cabin": "business",
        "total_baggages": 2, "nonfree_baggages": 0})))
    s.say("Reservation ZZ8L0P is in business class: you can check 2 bags free of charge.")
    s.user("Great, thanks.")
    s.say("You're welcome, Ana. Safe travels!")
    return s


def tau2_unpaid_line() -> Script:
    """tau2-bench telecom: the user toggles airplane mode on their own phone (the user simulator's
    tool, not the agent's), then the agent retries a refused `resume_line` 3x."""
    s = Script("tau2-unpaid-line", "2026-02-11T10:05:00")
    s.user("My mobile data stopped working this morning. My number is 555-123-2002.")
    s.calls(C("get_customer_by_phone", {"phone_number": "555-123-2002"}, json.dumps({
        "customer_id": "C1001", "full_name": "Dana Whitfield", "line_ids": ["L1002"]})))
    s.say("Thanks, Dana. Could you first check that airplane mode is off on your phone?")
    s.user("")  # the user's own action: toggle_airplane_mode (tau2_results' user calls)
    s.say("Thanks. Let me look at your line.")
    s.user("Airplane mode is off now, still no data.")
    s.calls(C("get_details_by_id", {"id": "L1002"}, json.dumps({
        "line_id": "L1002", "status": "Suspended", "suspension_reason": "unpaid_bill"})))
    for _ in range(3):
        s.calls(C("resume_line", {"customer_id": "C1001", "line_id": "L1002"},
                  "Error: Line L1002 cannot be resumed: bill B2031 is unpaid", error=True))
    s.say("Your line L1002 is suspended for the unpaid bill B2031; once it is paid I can resume it.")
    s.user("OK, I'll pay it first. ###STOP###")
    return s
