from django.urls import path

from conversations.views import whatsapp_webhook

app_name = "conversations"

urlpatterns = [
    path("whatsapp/", whatsapp_webhook, name="whatsapp_webhook"),
]
